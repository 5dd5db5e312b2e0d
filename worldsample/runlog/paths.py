"""Where each service file lives in a run directory: one place for every name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunFiles:
    run_dir: Path

    @classmethod
    def of(cls, run_dir: Path | str) -> RunFiles:
        return cls(Path(run_dir))

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
    def policies(self) -> Path:
        return self.run_dir / "policies"

    @property
    def tensorboard(self) -> Path:
        return self.run_dir / "tensorboard"

    @property
    def reports(self) -> Path:
        return self.run_dir / "reports"

    @property
    def world_model(self) -> Path:
        return self.run_dir / "world_model"

    @property
    def dashboard_token(self) -> Path:
        return self.run_dir / "dashboard_token"
