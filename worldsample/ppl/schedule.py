"""Uncertainty pacing: the synthetic share rho as a function of the actor's entropy on real states.

H is smoothed with an EMA, then normalised between two bounds that do not depend on the run's
history: H~ = clip((H - H_min) / (H_max - H_min), 0, 1), with H_max the most uncertain policy
(|A| ln 2 for a tanh-squashed policy on [-1, 1]^|A|: the uniform distribution on the box) and
H_min the entropy at which the policy counts as confident (SAC's target entropy). Then

    hyperbolic  rho = rho_max / (1 + kappa * H~^p)   (rho_max at H~ = 0, rho_max / (1 + kappa) at H~ = 1)
    linear      rho = rho_max * (1 - H~)

The first entropy measured (H_0) is kept as a metric only: after a behaviour-cloning warm start it
lies below H_min, and anchoring on it turned the schedule into a switch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from worldsample.errors import ConfigError
from worldsample.ppl.config import PPLConfig


def squashed_entropy_max(action_dim: int) -> float:
    """The largest entropy a tanh-squashed policy on [-1, 1]^action_dim can have: that of the uniform
    distribution on the box, action_dim * ln 2 (RLlib measures log-probabilities in the squashed
    [-1, 1] space whatever the action bounds)."""
    if action_dim < 1:
        raise ConfigError(f"the action dimension must be at least 1 to bound the entropy (got {action_dim})")
    return action_dim * math.log(2.0)


@dataclass
class EntropyPacer:
    cfg: PPLConfig
    entropy_min: float
    entropy_max: float
    h0: float | None = None
    h_ema: float | None = None

    def __post_init__(self) -> None:
        self._check_bounds(self.entropy_min, self.entropy_max)

    @staticmethod
    def _check_bounds(lo: float, hi: float) -> None:
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            raise ConfigError(
                f"PPL pacing needs entropy_min < entropy_max, both finite (got entropy_min={lo}, entropy_max={hi}); "
                "set ppl.entropy_min (default: SAC's target entropy) below ppl.entropy_max "
                "(default: |A| ln 2)"
            )

    def observe(self, entropy: float) -> None:
        if not math.isfinite(entropy):
            return  # a NaN from a diverged actor must not poison the schedule
        if self.h_ema is None:
            self.h_ema = entropy
        else:
            self.h_ema = self.cfg.entropy_ema * self.h_ema + (1 - self.cfg.entropy_ema) * entropy
        if self.h0 is None:
            self.h0 = entropy

    @property
    def normalised(self) -> float:
        """H~ in [0, 1]; 1 (as unsure as possible) before the first measurement."""
        if self.h_ema is None:
            return 1.0
        return min(1.0, max(0.0, (self.h_ema - self.entropy_min) / (self.entropy_max - self.entropy_min)))

    @property
    def rho(self) -> float:
        c = self.cfg
        if self.h_ema is None:
            return 0.0  # no entropy measured yet (the actor is not learning): no synthetic data
        h = self.normalised
        if c.pacing == "linear":
            return c.rho_max * (1.0 - h)
        return c.rho_max / (1.0 + c.kappa * h**c.p)

    def state(self) -> dict[str, float | None]:
        return {"h0": self.h0, "h_ema": self.h_ema}

    def load_state(self, st: dict[str, float | None]) -> None:
        # the bounds come from the configuration and the action space, not from the checkpoint
        self.h0, self.h_ema = st.get("h0"), st.get("h_ema")
