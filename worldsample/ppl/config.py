"""PPL settings. Defaults follow ALGORITHMS.md: rho_max 0.3, hyperbolic pacing on an entropy normalised
between SAC's target entropy and the squashed policy's maximum, 50/50 demo/online."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class PPLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["off", "naive", "ppl"] = Field(
        "ppl",
        description="off: real data only (RLPD/HIL-SERL); naive: fixed synthetic share; ppl: paced and Q-selected",
    )
    rho_max: float = Field(0.3, ge=0.0, le=1.0, description="cap on the synthetic share of a batch")
    naive_share: float = Field(0.3, ge=0.0, le=1.0, description="synthetic share in naive mode")
    pacing: Literal["linear", "hyperbolic"] = Field(
        "hyperbolic", description="rho of the normalised entropy H~: hyperbolic (see kappa) or rho_max * (1 - H~)"
    )
    kappa: float = Field(4.0, gt=0.0, description="hyperbolic pacing: rho = rho_max / (1 + kappa * H~^p)")
    p: float = Field(1.0, ge=1.0)
    entropy_ema: float = Field(0.9, ge=0.0, lt=1.0, description="EMA factor on the measured actor entropy")
    entropy_min: float | None = Field(
        None,
        description="entropy at which the policy counts as fully confident (H~ = 0); default: SAC's target entropy",
    )
    entropy_max: float | None = Field(
        None,
        description="entropy of the most uncertain policy (H~ = 1); default: |A| ln 2, the uniform distribution "
        "on the squashed action box",
    )
    placement: Literal["replace", "add"] = Field(
        "replace", description="replace: the floor(rho * B) synthetic rows take places in the batch of B "
        "(ALGORITHMS.md's placement); add: they come on top of B real rows, so a batch of B + floor(rho * B) rows "
        "gives the critic L = E_real + rho E_syn up to a common factor and synthetic data never displaces real data")
    delta_q: float = Field(0.05, ge=0.0, description="tolerance |mean Q(synthetic) - mean Q(real)|")
    demo_share: float = Field(0.5, ge=0.0, le=1.0, description="demo+intervention share of the real part")
    q_probe: int = Field(256, ge=8, description="samples per pool when estimating pool mean Q")
    q_probe_every: int = Field(10, ge=1, description="updates between pool mean-Q estimates")

    @model_validator(mode="after")
    def _entropy_bounds_do_not_cross(self) -> PPLConfig:
        lo, hi = self.entropy_min, self.entropy_max
        if lo is not None and hi is not None and hi <= lo:
            raise ValueError(f"ppl.entropy_max ({hi}) must exceed ppl.entropy_min ({lo})")
        return self
