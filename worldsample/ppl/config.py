"""PPL settings. Defaults follow ALGORITHMS.md: rho_max 0.3, linear pacing, 50/50 demo/online."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PPLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["off", "naive", "ppl"] = Field(
        "ppl",
        description="off: real data only (RLPD/HIL-SERL); naive: fixed synthetic share; ppl: paced and Q-selected",
    )
    rho_max: float = Field(0.3, ge=0.0, le=1.0, description="cap on the synthetic share of a batch")
    naive_share: float = Field(0.3, ge=0.0, le=1.0, description="synthetic share in naive mode")
    pacing: Literal["linear", "hyperbolic"] = "linear"
    kappa: float = Field(4.0, gt=0.0, description="hyperbolic pacing: rho = rho_max / (1 + kappa * H~^p)")
    p: float = Field(1.0, ge=1.0)
    entropy_ema: float = Field(0.9, ge=0.0, lt=1.0, description="EMA factor on the measured actor entropy")
    entropy_min: float | None = Field(
        None, description="entropy at which the policy counts as fully confident; default: SAC's target entropy"
    )
    delta_q: float = Field(0.05, ge=0.0, description="tolerance |mean Q(synthetic) - mean Q(real)|")
    demo_share: float = Field(0.5, ge=0.0, le=1.0, description="demo+intervention share of the real part")
    q_probe: int = Field(256, ge=8, description="samples per pool when estimating pool mean Q")
    q_probe_every: int = Field(10, ge=1, description="updates between pool mean-Q estimates")
