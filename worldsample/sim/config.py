"""Settings of the simulated arm, its scripted expert and the simulated human who intervenes.

Only pydantic is imported here so that loading a run configuration stays cheap; a task other than
the default is checked against Meta-World's task and expert maps, which loads Meta-World.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from worldsample.camera_settings import CAMERA_NAMES, RenderConfig

__all__ = ["CAMERA_NAMES", "ExpertConfig", "InterventionConfig", "RandomizationConfig", "RenderConfig", "SimArmConfig"]

Range = tuple[float, float]


class _Strict(BaseModel):
    # A typo in a config key must fail loudly instead of silently using a default.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RandomizationConfig(_Strict):
    """Per-episode perturbations of the "sim" domain; every scale multiplies the nominal value."""

    camera_jitter_deg: float = Field(
        15.0, ge=0.0, le=90.0, description="max |offset| of camera azimuth and elevation, degrees"
    )
    camera_distance_scale: Range = Field((0.85, 1.15), description="camera distance to its look-at point")
    friction_scale: Range = Field((0.5, 1.5), description="all contact friction coefficients")
    mass_scale: Range = Field((0.5, 2.0), description="mass and inertia of the free (manipulated) objects")
    light_scale: Range = Field((0.4, 1.4), description="diffuse intensity of every light")

    @field_validator("camera_distance_scale", "friction_scale", "mass_scale", "light_scale")
    @classmethod
    def _positive_range(cls, value: Range) -> Range:
        low, high = value
        if not 0.0 < low <= high:
            raise ValueError(f"must be (low, high) with 0 < low <= high, got {value}")
        return value


DEFAULT_TASK = "push-v3"


class SimArmConfig(_Strict):
    """A Meta-World Sawyer task seen through cameras, in the "real" or the randomised "sim" domain."""

    task: str = Field(
        DEFAULT_TASK, description="Meta-World v3 task with a scripted expert (metaworld.policies.ENV_POLICY_MAP)"
    )
    cameras: list[str] = Field(
        default_factory=lambda: ["corner"], description="Meta-World camera names; [] = state only, no rendering"
    )
    image_size: int = Field(64, ge=16, le=512, description="height = width of every camera image, pixels")
    render: RenderConfig = Field(default_factory=RenderConfig, description="render quality (fast on CPU by default)")
    domain: Literal["real", "sim"] = Field(
        "real", description="real: fixed scene with sensor noise; sim: randomised scene per episode"
    )
    max_episode_steps: int = Field(150, ge=1, le=10_000, description="steps before truncation")
    terminate_on_success: bool = Field(True, description="end the episode at the first successful step")
    proprio_noise_std: float = Field(0.002, ge=0.0, le=1.0, description="Gaussian proprio noise, real domain")
    action_delay_steps: int = Field(0, ge=0, le=50, description="actions take effect this many steps late, real domain")
    include_state: bool = Field(True, description='add the 39-dim Meta-World state as obs["state"]')
    randomization: RandomizationConfig = Field(default_factory=RandomizationConfig)

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        if task == DEFAULT_TASK:
            return task  # loading a config must not import MuJoCo for the default task
        from worldsample.sim.tasks import check_task  # imports Meta-World and MuJoCo: only for another task

        return check_task(task, error=ValueError)

    @field_validator("cameras")
    @classmethod
    def _known_cameras(cls, cameras: list[str]) -> list[str]:
        unknown = [c for c in cameras if c not in CAMERA_NAMES]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown}; choose from {list(CAMERA_NAMES)}")
        if len(set(cameras)) != len(cameras):
            raise ValueError(f"cameras must not repeat, got {cameras}")
        return cameras


class ExpertConfig(_Strict):
    """The scripted Meta-World policy used for demonstrations and takeovers."""

    action_noise_std: float = Field(0.0, ge=0.0, le=2.0, description="Gaussian noise added to each action")


class InterventionConfig(_Strict):
    """A simulated human who watches a policy and takes the controls when it strays.

    `trigger: deviation` (default) judges the motion: a step deviates when the Euclidean distance
    between the policy's and the expert's end-effector motion (action[:3], both clipped to [-1, 1];
    so it lies in [0, 2*sqrt(3)]) exceeds `deviation_threshold`. The gripper command is ignored
    because the expert leaves it open most of the time. A policy that wins by another path than
    the scripted one still deviates (bench/exploration.py counts how often).

    `trigger: stall` judges the outcome, as a person watching the arm would: a step stalls when
    the distance still to go (hand to the task's object plus object to the goal, from the
    noise-free state) is not at least `stall_progress` below the last distance that counted as
    progress (the episode's start, at first); after `stall_steps` stalled steps in a row the human
    takes over. The distance is made for tasks that move an object to a goal (push, pick-place,
    slide); where the goal is for the hand alone (reach) it does not measure progress.

    `trigger: lost` takes both into account: a step strays when its motion deviates from the
    expert's and the arm has made no progress since the last step that did (`stall_progress`);
    after `lost_steps` such steps in a row the human takes over (the scripted expert itself pauses
    for a few steps while it grips). A policy that wins by another path makes progress and is left
    alone; one that heads the wrong way or dithers is not.

    With any trigger a takeover lasts `takeover_steps` steps.
    """

    trigger: Literal["deviation", "stall", "lost"] = Field(
        "deviation", description="deviation: the policy's motion differs from the expert's; stall: no progress; "
        "lost: both at once"
    )
    deviation_threshold: float = Field(
        0.5, gt=0.0, description="a step deviates when |policy xyz - expert xyz| exceeds this"
    )
    stall_progress: float = Field(
        0.005, gt=0.0, description="trigger=stall or lost: metres the distance to go must fall to count as progress"
    )
    stall_steps: int = Field(
        30, ge=1, description="trigger=stall: steps without progress tolerated before a takeover"
    )
    patience_steps: int = Field(
        3, ge=0, description="trigger=deviation: consecutive deviating steps tolerated; the next one starts a "
        "takeover (0 = at once)"
    )
    lost_steps: int = Field(
        10, ge=0, description="trigger=lost: consecutive steps that deviate without progress tolerated"
    )
    takeover_steps: int = Field(10, ge=1, description="steps the expert drives once it has taken over")
