"""The robot profile: everything the bridge needs to know about one robot, loaded from YAML.

Topics, message types and rates of the sensor streams, the action topic with its limits, the
episode-control topics, the control rate and the staleness bound. The store schema of the
recorded group follows from it (`obs_specs`), so one profile means one schema.
"""

from __future__ import annotations

import contextvars
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from robot_bridge.errors import ProfileError
from robot_bridge.transport.base import QosSpec
from worldsample.camera_settings import CAMERA_NAMES, RenderConfig
from worldsample.frames import CropBox, FrameGeometry
from worldsample.policy.explore import explore_scale_at
from worldsample.store import KeySpec
from worldsample.yamlconfig import load_model

Reliability = Literal["reliable", "best_effort"]
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
ARRAY_TYPES = ("std_msgs/msg/Float32MultiArray", "std_msgs/msg/Float64MultiArray")
MSG_TYPE = r"^[A-Za-z][A-Za-z0-9_]*/msg/[A-Za-z][A-Za-z0-9_]*$"  # pkg/msg/Name
_PROFILE_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("profile_dir", default=None)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stream(_Strict):
    """One subscribed sensor topic."""

    topic: str = Field(pattern=r"^/[A-Za-z0-9_/~]+$")
    rate_hz: float = Field(gt=0, le=10_000, description="nominal publish rate (for drop counts and the sim)")
    required: bool = Field(True, description="a stale required stream faults the episode")
    reliability: Reliability = Field("best_effort", description="QoS the bridge requests (sensors: best effort)")

    @property
    def qos(self) -> QosSpec:
        return QosSpec(self.reliability, 5 if self.reliability == "best_effort" else 10)


class FrameSize(_Strict):
    height: int = Field(gt=0, le=16384)
    width: int = Field(gt=0, le=16384)


class CropSpec(_Strict):
    """A box in native pixels: rows top..top+height, columns left..left+width."""

    top: int = Field(0, ge=0)
    left: int = Field(0, ge=0)
    height: int = Field(gt=0, le=16384)
    width: int = Field(gt=0, le=16384)


class CameraStream(Stream):
    """A camera: frames of `native` size on the wire, cut to `crop`, area-resized to height x width.

    height x width is what the store keeps and the policy sees. Without `native` the camera must
    publish exactly that size (no resize); without `crop` the whole native frame is resized (the
    aspect ratio may change)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    type: Literal["sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"] = "sensor_msgs/msg/Image"
    height: int = Field(gt=0, le=4096, description="stored (policy) frame height, after the crop and resize")
    width: int = Field(gt=0, le=4096, description="stored (policy) frame width, after the crop and resize")
    channels: Literal[1, 3] = 3
    native: FrameSize | None = Field(None, description="frame size the camera publishes; height x width by default")
    crop: CropSpec | None = Field(None, description="box of the native frame kept before the resize; all of it by "
                                  "default")

    @model_validator(mode="after")
    def _geometry(self) -> CameraStream:
        try:
            _ = self.geometry  # FrameGeometry checks the sizes and that the crop box is inside the frame
        except ValueError as e:
            hint = "" if self.native else "; without `native` the camera must publish height x width"
            raise ValueError(f"camera {self.name!r}: {e}{hint}") from None
        return self

    @property
    def key(self) -> str:
        return f"image_{self.name}"

    @property
    def native_size(self) -> tuple[int, int]:
        """(height, width) of the frames on the wire."""
        return (self.native.height, self.native.width) if self.native else (self.height, self.width)

    @property
    def geometry(self) -> FrameGeometry:
        """native frame -> stored frame (worldsample.frames), the one transform every path uses."""
        c = self.crop
        return FrameGeometry(self.native_size, (self.height, self.width),
                             CropBox(c.top, c.left, c.height, c.width) if c else None)


class JointStream(Stream):
    key: str = "proprio"
    names: list[str] = Field(min_length=1, description="joint order in the stored vector")
    fields: list[Literal["position", "velocity", "effort"]] = ["position"]

    @property
    def dim(self) -> int:
        return len(self.names) * len(self.fields)


class VectorStream(Stream):
    """Numbers from one topic of any message type, stored as one float32 observation key.

    `fields` are paths to numeric fields of the message (`pose.position.x`, `position[0:7]`); the
    vector is their values in order. A Float32/Float64MultiArray may leave them out: its whole
    `data`, of exactly `dim` values. `dim` follows from `fields` when they are given."""

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: str = Field("std_msgs/msg/Float32MultiArray", pattern=MSG_TYPE, description="any message type (pkg/msg/Name)")
    fields: list[str] | None = Field(None, min_length=1, description="numeric field paths, e.g. pose.position.x")
    dim: int | None = Field(None, gt=0, le=4096, description="number of values; derived from `fields` when given")

    @model_validator(mode="after")
    def _dim(self) -> VectorStream:
        if self.fields is None and self.type not in ARRAY_TYPES:
            raise ValueError(f"vector stream {self.key!r}: {self.type} needs `fields` (paths to its numeric fields, "
                             "e.g. [pose.position.x, pose.position.y]); only a MultiArray can go without")
        if self.fields is None and self.dim is None:
            raise ValueError(f"vector stream {self.key!r}: a {self.type.rsplit('/', 1)[-1]} without `fields` needs "
                             "`dim`")
        return self


class WrenchStream(Stream):
    key: str = "wrench"
    required: bool = False


class ActionSpec(_Strict):
    """The action vector on the wire: a MultiArray's `data`, or numeric fields of any message type
    (`fields`, one path per entry or a slice for several, e.g. twist.linear.x or
    points[0].positions[0:7]), with `constants` for the other fields (header.frame_id, joint_names)."""

    topic: str = "/worldsample/action"
    type: str = Field("std_msgs/msg/Float32MultiArray", pattern=MSG_TYPE, description="any message type (pkg/msg/Name)")
    fields: list[str] | None = Field(None, min_length=1, description="field path of each action entry, in order")
    constants: dict[str, Any] = Field({}, description="field path -> value set in every action message")
    stamp: bool = Field(True, description="set header.stamp to the send time (messages with a std_msgs/Header)")
    low: list[float]
    high: list[float]
    max_delta: float | list[float] = Field(2.0, description="max |a_t - a_(t-1)| per dimension")
    hold: list[float] | None = Field(None, description="action that holds the arm; zeros by default")

    @model_validator(mode="after")
    def _dims(self) -> ActionSpec:
        if self.fields is None and self.type not in ARRAY_TYPES:
            raise ValueError(f"action type {self.type} needs `fields`: the message field of each action entry "
                             "(e.g. [twist.linear.x, twist.linear.y, twist.linear.z]); only a MultiArray goes without")
        if self.fields is None and self.constants:
            raise ValueError("action constants need `fields` (a MultiArray action has no other fields to set)")
        n = len(self.low)
        sizes = {len(self.high), len(self.hold or self.low)}
        if isinstance(self.max_delta, list):
            sizes.add(len(self.max_delta))
        if n == 0 or sizes != {n}:
            raise ValueError("action low, high, hold and max_delta (if a list) need the same length")
        if any(lo > hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ValueError("action low must not exceed high")
        return self

    @property
    def dim(self) -> int:
        return len(self.low)


class ControlTopics(_Strict):
    """Episode control over plain topics (no services, see ROS2.md)."""

    command: str = "/worldsample/command"  # std_msgs/String JSON, operator -> bridge
    status: str = "/worldsample/status"  # std_msgs/String JSON, bridge -> anyone
    estop: str = "/worldsample/estop"  # std_msgs/Bool, true = stop now (latched until false)
    intervention: str = "/worldsample/intervention"  # action type, human takeover stream
    robot_command: str = "/robot/command"  # std_msgs/String JSON, bridge -> robot (reset)
    robot_event: str = "/robot/event"  # std_msgs/String JSON, robot -> bridge (reset_done)
    success: str | None = "/robot/success"  # std_msgs/Bool from the robot or a success detector


class SearchSpec(_Strict):
    """Best-of-N search at each control tick in the run's world model (robot_bridge/core/search.py)."""

    n: int = Field(8, ge=1, le=256, description="candidates; 1 = the base policy alone")
    horizon: int = Field(5, ge=1, le=200, description="imagined steps per candidate")
    budget_ms: float = Field(40.0, gt=0, description="time per control tick; past it the base policy's action is "
                             "sent and counted as a fallback. Below the control period")
    samples: int | None = Field(None, ge=1, le=64, description="imagined futures per candidate; default 4 for a "
                                "stochastic world model, else 1")
    spread: float | None = Field(None, gt=0, description="a deterministic policy's candidates: its action plus "
                                 "N(0, spread^2); a stochastic policy's are sampled from it")
    seed: int = 0


class EpisodeSpec(_Strict):
    group: str = "real"
    domain: str = "real"
    max_steps: int = Field(150, ge=1)
    end_on_success: bool = True
    reset_timeout_s: float = Field(10.0, gt=0)
    intervention_timeout_ms: float = Field(300, gt=0, description="takeover ends after this long without messages")
    keep_faulted: bool = Field(
        False, description="commit faulted episodes (marked outcome=faulted) instead of dropping them"
    )
    max_steps_failure: bool = Field(
        False, description="label an episode that reaches max_steps a failure (success false), as the operator's "
        "failure would; `demos record` sets it, so every recorded demonstration is labelled")
    chunk_len: int = Field(32, ge=1, le=4096)
    max_backlog: int = Field(200, ge=1, description="steps waiting for the store before the episode is dropped")
    auto_start: bool = Field(
        False,
        description=(
            "start the next episode as soon as one ends (unattended online RL); the first waits for an exported policy"
        ),
    )
    auto_start_steps: int | None = Field(
        None, ge=1,
        description=(
            "with auto_start: start no new episode once the group holds this many committed steps (the run's "
            "real-step budget; `worldsample run` sets it to loop.real_steps); null: no limit"
        ),
    )
    max_policy_lag_steps: int | None = Field(
        None, ge=0,
        description=(
            "with auto_start: the next episode waits while the group holds more than this many committed steps "
            "beyond the real steps the newest published policy was trained on (its `source.real_steps`, looked up "
            "once a second, whichever version `policy` runs): the learner keeps its update-to-data ratio on the "
            "robot's clock instead of "
            "falling behind (`worldsample run` sets it to loop.max_lag_steps); null: never wait"
        ),
    )
    fault_recover_s: float | None = Field(
        3.0, gt=0,
        description=(
            "with auto_start: after a fault other than the e-stop (a stale stream, a reset that timed out), start "
            "again once every required stream has been fresh this long; null: stay faulted until the operator clears"
        ),
    )
    explore: bool = Field(False, description="sample a stochastic policy's actions (online RL) instead of its mean")
    explore_scale: float = Field(
        1.0, gt=0.0, le=1.0, description="with explore: sample with the policy's spread (before the squash) times this "
        "(`worldsample run` sets it to loop.explore_scale)")
    explore_scale_end: float | None = Field(
        None, gt=0.0, le=1.0, description="with explore: the scale the arm ends at, reached from explore_scale "
        "linearly between the group's committed-step counts of explore_anneal_steps and held after, set at each "
        "episode's start (`worldsample run` sets both from loop.explore_scale_end and loop.explore_anneal); "
        "null: explore_scale all along")
    explore_anneal_steps: tuple[int, int] = Field(
        (0, 0), description="with explore_scale_end: the committed steps at which the scale starts to fall and "
        "the ones at which it reaches explore_scale_end")
    policy: Literal["latest", "recommended"] = Field(
        "latest", description="the policy version to run: the newest exported one, or the one RUN/policies/recommended "
        "names (`worldsample eval policies --recommend` or the trainer's scoring; latest until there is one)")
    search: SearchSpec | None = Field(None, description="Best-of-N search in the run's world model at each tick "
                                      "(off by default), e.g. {n: 8, horizon: 5, budget_ms: 40}")

    def explore_scale_at(self, committed: int) -> float:
        """The noise scale of an episode that starts with `committed` steps in the group."""
        return explore_scale_at(self.explore_scale, self.explore_scale_end, self.explore_anneal_steps, committed)

    @model_validator(mode="after")
    def _anneal_in_order(self) -> EpisodeSpec:
        lo, hi = self.explore_anneal_steps
        if not 0 <= lo <= hi:
            raise ValueError(f"episode.explore_anneal_steps {list(self.explore_anneal_steps)}: expected "
                             "0 <= start <= end committed steps")
        return self

    @model_validator(mode="after")
    def _search(self) -> EpisodeSpec:
        if self.search is not None and self.explore:
            raise ValueError("episode.search and episode.explore exclude each other: the search samples its own "
                             "candidates and executes the best")
        return self


class HomeSpec(_Strict):
    """The `home` reset: drive an observed pose to `pose` through the action topic, then settle."""

    key: str = Field("proprio", description="observation key holding the pose (e.g. the joint stream's key)")
    pose: list[float] = Field(min_length=1, description="home values of the observation entries in `indices`")
    indices: list[int] | None = Field(None, description="entries of the observation compared; the first len(pose)")
    action_indices: list[int] | None = Field(
        None, description="action entries that drive them; the first len(pose). The other entries send `hold`"
    )
    mode: Literal["delta", "absolute"] = Field(
        "delta", description="delta: action = gain * (pose - observed), for velocity/delta arms; absolute: the pose"
    )
    gain: float = Field(1.0, gt=0)
    tolerance: float = Field(0.02, gt=0, description="max |pose - observed| over the entries that counts as home")
    settle_s: float = Field(0.5, ge=0, description="time held within tolerance (sending `hold`) before the episode")

    @model_validator(mode="after")
    def _lengths(self) -> HomeSpec:
        n = len(self.pose)
        for name in ("indices", "action_indices"):
            v = getattr(self, name)
            if v is not None and len(v) != n:
                raise ValueError(f"reset.home.{name} needs one entry per pose value ({n})")
        return self


class ResetSpec(_Strict):
    """How the scene is reset between episodes and who says an episode starts.

    operator: a person resets the scene and starts the episode (the terminal's keys, the command
    topic, the robot event topic or the dashboard); the episode begins once every required stream
    is fresh. handshake: the bridge sends `reset` on control.robot_command and waits for the
    robot's `reset_done` on control.robot_event. home: the bridge drives to `home.pose` through the
    action topic until within tolerance, holds for `home.settle_s`, then begins.
    The reset fails (a fault naming the cause) after episode.reset_timeout_s.
    """

    strategy: Literal["operator", "handshake", "home"] = "operator"
    home: HomeSpec | None = None
    keys: bool = Field(True, description="read single keys from the bridge's terminal (when it has one)")

    @model_validator(mode="after")
    def _home(self) -> ResetSpec:
        if self.strategy == "home" and self.home is None:
            raise ValueError("reset.strategy home needs a reset.home section (key, pose, tolerance, ...)")
        return self


class SimSpec(_Strict):
    """Only read by `sim-robot`."""

    task: str = "push-v3"
    images: Literal["synthetic", "render"] = Field(
        "render", description="render: MuJoCo renders of each camera; synthetic: a test pattern that encodes the step"
    )
    cameras: dict[str, str] = Field(
        {}, description="profile camera name -> Meta-World camera it shows; unlisted names are Meta-World names"
    )
    render: RenderConfig = Field(default_factory=RenderConfig, description="render quality (fast on CPU by default)")
    physics_hz: float | None = Field(None, gt=0, description="sim steps per second on the clock (physics: clock), or "
                                     "while no command arrives (command); the control rate by default")
    physics: Literal["command", "clock"] = Field(
        "command", description="command: one sim step as each action arrives (an arm controller executing each "
        "command over one control period), holding the last one at physics_hz when none comes; clock: sim steps "
        "on its own timer at physics_hz, which aliases against the bridge's equal-rate clock (a recorded step "
        "then holds zero or two sim steps)")
    seed: int = 0

    @field_validator("cameras")
    @classmethod
    def _known_cameras(cls, cameras: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(cameras.values()) - set(CAMERA_NAMES))
        if unknown:
            raise ValueError(f"unknown Meta-World camera(s) {unknown}; choose from {list(CAMERA_NAMES)}")
        return cameras

    def sim_camera(self, name: str) -> str:
        """The Meta-World camera rendered for the profile camera `name`."""
        return self.cameras.get(name, name)


class RobotProfile(_Strict):
    name: str
    typestore: Literal["humble", "jazzy"] = Field("jazzy", description="ROS 2 distro of the message definitions")
    types: dict[str, str] = Field({}, description="custom message types: pkg/msg/Name -> .msg file (relative to the "
                                  "profile file)")
    control_rate_hz: float = Field(gt=0, le=1000)
    staleness_ms: float = Field(500, gt=0, description="a required stream older than this is stale")
    status_rate_hz: float = Field(2.0, gt=0)
    live_frames_hz: float = Field(2.0, ge=0, le=30, description="how often the newest frame of each camera is "
                                  "written to RUN/live/ for the dashboard's robot panel; 0: never")
    cameras: list[CameraStream] = []
    joints: JointStream | None = None
    vectors: list[VectorStream] = []
    wrench: WrenchStream | None = None
    action: ActionSpec
    control: ControlTopics = ControlTopics()
    episode: EpisodeSpec = EpisodeSpec()
    reset: ResetSpec = ResetSpec()
    sim: SimSpec = SimSpec()

    @field_validator("types")
    @classmethod
    def _msg_files(cls, v: dict[str, str]) -> dict[str, str]:
        import re

        base = _PROFILE_DIR.get() or Path.cwd()
        out = {}
        for name, path in v.items():
            if not re.match(MSG_TYPE, name):
                raise ValueError(f"custom type name {name!r} must look like pkg/msg/Name")
            out[name] = str((base / Path(path).expanduser()).resolve())
        return out

    @cached_property
    def msg_types(self):
        """The MessageTypes of `typestore` plus the custom `types` (robot_bridge.codec.typestore)."""
        from robot_bridge.codec.typestore import message_types

        return message_types(self.typestore, self.types)

    def action_mapping(self):
        """The action vector <-> its message (robot_bridge.codec.fields.FieldMapping)."""
        from robot_bridge.codec.fields import FieldMapping

        a = self.action
        return FieldMapping(self.msg_types, a.type, a.fields, a.dim, a.constants, a.stamp, "action")

    def vector_mapping(self, v: VectorStream):
        from robot_bridge.codec.fields import FieldMapping

        return FieldMapping(self.msg_types, v.type, v.fields, v.dim, None, True, v.key)

    @model_validator(mode="after")
    def _message_types(self) -> RobotProfile:
        """Every type, field path and constant must exist in the typestore and the custom `.msg` files."""
        import numpy as np

        types = self.msg_types  # MessageTypeError (a ValueError) names a missing or bad .msg file
        for s in self.streams:
            types.check(stream_typename(s))
        for v in self.vectors:
            try:
                m = self.vector_mapping(v)
            except ValueError as e:
                raise ValueError(f"vectors {v.key!r}: {e}") from None
            if v.dim is not None and m.dim != v.dim:
                raise ValueError(f"vectors {v.key!r}: fields hold {m.dim} values, dim says {v.dim}")
            object.__setattr__(v, "dim", m.dim)  # derived from the fields
        try:
            m = self.action_mapping()
        except ValueError as e:
            raise ValueError(f"action: {e}") from None
        if m.dim != self.action.dim:
            sizes = ", ".join(f"{p.text} ({p.dim})" for p in m.paths)
            raise ValueError(f"action: fields give {m.dim} value(s) [{sizes}], but low/high have {self.action.dim}: "
                             "one field per action entry")
        try:  # a message of the hold action must serialise (constants of the right type and range)
            m.encode(np.asarray(self.action.hold or [0.0] * self.action.dim))
        except ValueError as e:
            raise ValueError(f"action: {e}") from None
        return self

    @model_validator(mode="after")
    def _unique(self) -> RobotProfile:
        keys = [s.key for s in self.streams]
        if len(set(keys)) != len(keys):
            raise ValueError(f"observation keys repeat: {keys}")
        topics = [s.topic for s in self.streams] + [self.action.topic]
        if len(set(topics)) != len(topics):
            raise ValueError(f"a topic is used twice: {topics}")
        if not keys:
            raise ValueError("a profile needs at least one sensor stream")
        search = self.episode.search
        if search is not None and search.budget_ms >= 1e3 / self.control_rate_hz:
            raise ValueError(f"episode.search.budget_ms ({search.budget_ms:g}) must be below the control period "
                             f"({1e3 / self.control_rate_hz:g} ms at {self.control_rate_hz:g} Hz)")
        home = self.reset.home
        if home is not None:
            spec = self.obs_specs().get(home.key)
            if spec is None or len(spec.shape) != 1:
                raise ValueError(f"reset.home.key {home.key!r} is not a vector observation key of this profile")
            idx = home.indices or list(range(len(home.pose)))
            aidx = home.action_indices or list(range(len(home.pose)))
            if any(not 0 <= i < spec.shape[0] for i in idx):
                raise ValueError(f"reset.home indices {idx} out of range for {home.key} (size {spec.shape[0]})")
            if any(not 0 <= i < self.action.dim for i in aidx):
                raise ValueError(f"reset.home action_indices {aidx} out of range (action size {self.action.dim})")
        return self

    def topic_of(self, key: str) -> str:
        return next(s.topic for s in self.streams if s.key == key)

    @property
    def streams(self) -> list[CameraStream | JointStream | VectorStream | WrenchStream]:
        return [
            *self.cameras,
            *([self.joints] if self.joints else []),
            *self.vectors,
            *([self.wrench] if self.wrench else []),
        ]

    def obs_specs(self) -> dict[str, KeySpec]:
        specs: dict[str, KeySpec] = {}
        for c in self.cameras:
            specs[c.key] = KeySpec(dtype="uint8", shape=(c.height, c.width, c.channels), kind="image", camera=c.name)
        if self.joints:
            specs[self.joints.key] = KeySpec(dtype="float32", shape=(self.joints.dim,), finite=True)
        for v in self.vectors:
            specs[v.key] = KeySpec(dtype="float32", shape=(v.dim,), finite=True)
        if self.wrench:
            specs[self.wrench.key] = KeySpec(dtype="float32", shape=(6,), finite=True)
        return specs


def load_profile(path: Path | str, overrides: list[str] | None = None) -> RobotProfile:
    """The profile at `path` with `key.path=value` overrides (see configs/robot_profiles/). Paths of
    custom `.msg` files (`types`) are relative to the profile's directory."""
    token = _PROFILE_DIR.set(Path(path).resolve().parent)
    try:
        return load_model(RobotProfile, path, overrides, what="robot profile", error=ProfileError)
    finally:
        _PROFILE_DIR.reset(token)


def stream_typename(s: Stream) -> str:
    if isinstance(s, CameraStream | VectorStream):
        return s.type
    if isinstance(s, JointStream):
        return "sensor_msgs/msg/JointState"
    return "geometry_msgs/msg/WrenchStamped"
