"""Where everything lives in a run directory: the one place that spells these names.

    RUN/config.yaml         the run's configuration (what `worldsample run` was started with)
    RUN/config_history.jsonl  each start and resume: time, command, overrides
    RUN/store/              the Zarr episode store (worldsample.store)
    RUN/policies/           the policy registry, one version per directory (worldsample.policy)
    RUN/world_model/        world-model checkpoints, one version per directory
    RUN/trainer/            trainer checkpoints (learner, mixer and synthesis state)
    RUN/metrics.jsonl, RUN/events.jsonl, RUN/status.json, RUN/control/   the run log (worldsample.runlog)
    RUN/tensorboard/, RUN/reports/, RUN/dashboard_token, RUN/<process>.log
    RUN/nodes.json          the Ray nodes and the node each trainer part runs on (services/trainer/nodes.py)
    RUN/live/<camera>.jpg   the bridge's newest frame per camera, with its stamp (worldsample/live_frames.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LIVE_FRAME_SUFFIX = ".jpg"


@dataclass(frozen=True)
class RunFiles:
    run_dir: Path

    @classmethod
    def of(cls, run_dir: Path | str) -> RunFiles:
        return cls(Path(run_dir))

    @property
    def config(self) -> Path:
        return self.run_dir / "config.yaml"

    @property
    def config_history(self) -> Path:
        return self.run_dir / "config_history.jsonl"

    @property
    def store(self) -> Path:
        return self.run_dir / "store"

    @property
    def policies(self) -> Path:
        return self.run_dir / "policies"

    @property
    def world_model(self) -> Path:
        return self.run_dir / "world_model"

    @property
    def trainer(self) -> Path:
        return self.run_dir / "trainer"

    @property
    def metrics(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    @property
    def events(self) -> Path:
        return self.run_dir / "events.jsonl"

    @property
    def status(self) -> Path:
        return self.run_dir / "status.json"

    @property
    def control(self) -> Path:
        return self.run_dir / "control"

    @property
    def tensorboard(self) -> Path:
        return self.run_dir / "tensorboard"

    @property
    def reports(self) -> Path:
        return self.run_dir / "reports"

    @property
    def ray_logs(self) -> Path:
        """The trainer's local Ray logs, kept after its temp dir is removed."""
        return self.run_dir / "ray_logs"

    @property
    def nodes(self) -> Path:
        """The Ray nodes and which node each part of the trainer runs on, rewritten while it runs."""
        return self.run_dir / "nodes.json"

    @property
    def live_frames(self) -> Path:
        """The bridge's newest frame per camera (`live_frame`), rewritten a few times a second."""
        return self.run_dir / "live"

    def live_frame(self, camera: str) -> Path:
        return self.live_frames / f"{camera}{LIVE_FRAME_SUFFIX}"

    @property
    def dashboard_token(self) -> Path:
        return self.run_dir / "dashboard_token"

    def log(self, process: str) -> Path:
        """The log file of a process started for this run (bridge, sim-robot, dashboard)."""
        return self.run_dir / f"{process}.log"
