"""What a finished (or stopped) training run reports."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainSummary:
    real_steps: int = 0
    episodes: int = 0
    updates: int = 0
    success_before: float | None = None
    success_after: float | None = None
    synthetic_share: float = 0.0
    wm_versions: int = 0
    evals: list[tuple[int, float, int | None]] = field(default_factory=list)  # (real steps, success, policy version)
    wm_eval: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def best(self) -> tuple[int, float, int | None] | None:
        """The best evaluated policy (the latest of equals): online RL is not monotone, and the
        registry keeps every version, so this one can be deployed instead of the last."""
        return max(reversed(self.evals), key=lambda e: e[1]) if self.evals else None
