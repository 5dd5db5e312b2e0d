"""The simulated arm as a ROS 2 robot for `worldsample run --robot bridge`: two processes that
speak DDS on loopback, exactly as they would with a physical arm, plus their shutdown.

    sim-robot  publishes cameras / joint states / the task state, applies actions, resets;
    bridge     records episodes into RUN's store and drives the arm with RUN's latest policy.

The robot profile is configs/robot_profiles/sim_arm.yaml, adjusted to the run's config (task,
episode length, cameras, exploration, the real-step budget) through the profile's own `--set` overrides.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from worldsample.config import RunConfig
from worldsample.errors import ConfigError, RobotProcessError
from worldsample.paths import RunFiles

DEFAULT_PROFILE = Path("configs/robot_profiles/sim_arm.yaml")
# the range the private DDS domain is drawn from; WORLDSAMPLE_DDS_DOMAINS=LO-HI narrows it, e.g. to keep
# jobs started side by side (the test suite's parallel workers) on disjoint domains
DOMAINS_ENV = "WORLDSAMPLE_DDS_DOMAINS"
DEFAULT_DOMAINS = (1, 200)


def domain_range() -> tuple[int, int]:
    """(lo, hi), inclusive, from WORLDSAMPLE_DDS_DOMAINS ("LO-HI", within 0-232) or 1-200."""
    spec = os.environ.get(DOMAINS_ENV, "").strip()
    if not spec:
        return DEFAULT_DOMAINS
    try:
        lo, hi = (int(x) for x in spec.split("-"))
    except ValueError:
        raise ConfigError(f"{DOMAINS_ENV}={spec!r}: expected LO-HI, e.g. 1-200") from None
    if not 0 <= lo <= hi <= 232:
        raise ConfigError(f"{DOMAINS_ENV}={spec!r}: DDS domains are 0-232, LO <= HI")
    return lo, hi


def private_domain() -> int:
    """A random DDS domain from domain_range()."""
    return random.Random(os.getpid() ^ time.time_ns()).randint(*domain_range())


def profile_overrides(cfg: RunConfig, profile: Path = DEFAULT_PROFILE) -> list[str]:
    sets = [f"sim.task={cfg.env.task}", f"sim.seed={cfg.loop.seed}", f"episode.max_steps={cfg.env.max_episode_steps}",
            f"episode.end_on_success={str(cfg.env.terminate_on_success).lower()}",
            "episode.auto_start=true", f"episode.auto_start_steps={cfg.loop.real_steps}",
            f"episode.explore={str(cfg.loop.explore).lower()}", f"episode.explore_scale={cfg.loop.explore_scale}",
            f"episode.explore_scale_end={'null' if cfg.loop.explore_scale_end is None else cfg.loop.explore_scale_end}",
            f"episode.explore_anneal_steps={list(cfg.loop.explore_anneal_steps)}",
            f"episode.max_policy_lag_steps={'null' if cfg.loop.max_lag_steps is None else cfg.loop.max_lag_steps}"]
    sets += camera_overrides(cfg, profile)
    # the simulated arm renders its cameras with the run's render settings
    sets += [f"sim.render.{k}={str(v).lower() if isinstance(v, bool) else v}"
             for k, v in cfg.env.render.model_dump().items()]
    return sets


def camera_overrides(cfg: RunConfig, profile: Path = DEFAULT_PROFILE) -> list[str]:
    """The run's cameras (`env.cameras`, square at `env.image_size`) as the profile's camera streams.

    Nothing when the profile already has exactly those cameras at that size; `cameras=[]` for a
    state-only run; otherwise one stream per run camera on `/cam/<name>/image_raw`, its type, rate
    and QoS taken from the profile's first camera (the simulated arm renders each one as the
    Meta-World camera of that name)."""
    if not cfg.env.cameras:
        return ["cameras=[]"]  # state-only runs: no camera streams to record
    from robot_bridge.profile import load_profile

    cams = load_profile(profile).cameras
    size = cfg.env.image_size
    if [c.name for c in cams] == cfg.env.cameras and all(c.height == c.width == size and c.native is None
                                                         for c in cams):
        return []
    if not cams:
        raise ConfigError(f"robot profile {profile} has no camera to model the run's cameras {cfg.env.cameras} on")
    template = cams[0].model_dump(mode="json", exclude={"name", "topic", "height", "width", "native", "crop"})
    streams = [{**template, "name": c, "topic": f"/cam/{c}/image_raw", "height": size, "width": size}
               for c in cfg.env.cameras]
    return ["cameras=" + json.dumps(streams)]


def sim_robot_args(cfg: RunConfig) -> list[str]:
    """sim-robot's own options: the run's simulated human (settings included) when interventions are on."""
    return ["--intervene", "--human", cfg.intervention.model_dump_json()] if cfg.loop.interventions else []


class SimRobotOverDds:
    """Context manager: start sim-robot and bridge on a private DDS domain; stop them on exit
    (SIGTERM first, so the bridge closes its episode cleanly; SIGKILL after `grace_s`). Both get
    this process as `--supervisor-pid`, so they stop the same way if it dies without stopping them."""

    def __init__(
        self,
        run: Path,
        cfg: RunConfig,
        profile: Path = DEFAULT_PROFILE,
        domain_id: int | None = None,
        grace_s: float = 15.0,
    ):
        if not profile.exists():
            raise ConfigError(f"robot profile {profile} not found; run from the repository root or pass --profile")
        self.run, self.cfg, self.profile = Path(run), cfg, profile
        if domain_id is None:
            domain_id = private_domain()
        self.domain_id = domain_id
        self.grace_s = grace_s
        self.procs: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, args: list[str], sets: list[str]) -> None:
        cmd = [sys.executable, "-m", "robot_bridge", name, "--profile", str(self.profile), "--loopback",
               "--domain-id", str(self.domain_id), "--supervisor-pid", str(os.getpid()), *args, *sets]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
        with open(RunFiles.of(self.run).log(name), "w") as log:
            self.procs[name] = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def __enter__(self) -> SimRobotOverDds:
        # both processes get the same profile overrides, read from the profile once
        sets = [x for s in profile_overrides(self.cfg, self.profile) for x in ("--set", s)]
        self._start("bridge", ["--run", str(self.run)], sets)
        self._start("sim-robot", sim_robot_args(self.cfg), sets)
        return self

    def check(self) -> None:
        """Raise if either process has died (its log names the reason)."""
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RobotProcessError(f"{name} exited with {p.returncode} (see {RunFiles.of(self.run).log(name)}); "
                                        f"continue the run with `worldsample run --resume {self.run}`")

    def __exit__(self, *exc) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
