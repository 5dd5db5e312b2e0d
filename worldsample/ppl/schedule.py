"""Uncertainty pacing: the synthetic share rho as a function of the actor's entropy on real states.

H is smoothed with an EMA, then normalised against H_0 (the first measurement, i.e. the entropy at
the start of online training) and H_min: H~ = clip((H - H_min) / (H_0 - H_min), 0, 1). A policy
as unsure as at the start (H~ = 1) gets no synthetic data; a confident one (H~ = 0) gets rho_max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from worldsample.ppl.config import PPLConfig


@dataclass
class EntropyPacer:
    cfg: PPLConfig
    entropy_min: float
    h0: float | None = None
    h_ema: float | None = None

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
        if self.h_ema is None or self.h0 is None:
            return 1.0
        span = self.h0 - self.entropy_min
        if span <= 1e-8:
            return 0.0 if self.h_ema <= self.entropy_min else 1.0
        return min(1.0, max(0.0, (self.h_ema - self.entropy_min) / span))

    @property
    def rho(self) -> float:
        c = self.cfg
        h = self.normalised
        if c.pacing == "linear":
            return c.rho_max * (1.0 - h)
        # hyperbolic in the normalised entropy, rescaled so that H~ = 1 gives 0 and H~ = 0 gives rho_max
        raw = 1.0 / (1.0 + c.kappa * h**c.p)
        floor = 1.0 / (1.0 + c.kappa)
        return c.rho_max * (raw - floor) / (1.0 - floor)

    def state(self) -> dict[str, float | None]:
        return {"h0": self.h0, "h_ema": self.h_ema, "entropy_min": self.entropy_min}

    def load_state(self, st: dict[str, float | None]) -> None:
        self.h0, self.h_ema = st.get("h0"), st.get("h_ema")
        if st.get("entropy_min") is not None:
            self.entropy_min = float(st["entropy_min"])
