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
    synthetic_share: float = 0.0  # of the last batch
    synthetic_share_sum: float = 0.0  # over the rounds that learned: the mean is the run's share
    synthetic_share_rounds: int = 0
    human_last_quarter: float | None = None  # share of online steps a human drove, last quarter of the budget
    recommended: int | None = None  # the policy version the world model recommends (RUN/policies/recommended)
    wm_versions: int = 0
    evals: list[tuple[int, float, int | None]] = field(default_factory=list)  # (real steps, success, policy version)
    wm_eval: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def best(self) -> tuple[int, float, int | None] | None:
        """The best evaluated policy (the latest of equals): online RL is not monotone, and the
        registry keeps every version, so this one can be deployed instead of the last."""
        return max(reversed(self.evals), key=lambda e: e[1]) if self.evals else None

    @property
    def synthetic_share_mean(self) -> float:
        return self.synthetic_share_sum / self.synthetic_share_rounds if self.synthetic_share_rounds else 0.0

    @property
    def last_vs_best(self) -> float | None:
        """Points the last evaluation lies below the best one (0 when the last is the best)."""
        if not self.evals:
            return None
        return 100 * (max(e[1] for e in self.evals) - self.evals[-1][1])


def human_share(records, first_step: int) -> float | None:
    """Share of the steps a human drove, over the episodes that start at or after `first_step`
    (online step count, episode records in commit order)."""
    steps = interventions = 0
    t = 0
    for rec in records:
        if t >= first_step:
            steps, interventions = steps + rec.length, interventions + rec.interventions
        t += rec.length
    return interventions / steps if steps else None
