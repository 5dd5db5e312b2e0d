"""Synthesis settings. Defaults from ALGORITHMS.md: s = 0.2, sigma = 0.05, horizon 5-15."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SynthConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    horizon: int = Field(10, ge=1, le=256, description="imagined steps per branch")
    scale: float = Field(0.2, ge=0.0, lt=1.0, description="xi ~ U(1 - s, 1 + s) per segment and dimension")
    sigma: float = Field(0.05, ge=0.0, description="per-step action noise std")
    context: int = Field(3, ge=1, le=32, description="real frames conditioning each branch")
    recent_episodes: int = Field(50, ge=1, description="branch points come from this many most recent real episodes")
    groups: list[str] = Field(["real", "demo"], description="groups whose episodes are branched")
    success_threshold: float = Field(0.5, gt=0.0, lt=1.0, description="success-head probability that labels success")
    max_uncertainty: float | None = Field(None, gt=0.0, description="veto a branch whose disagreement exceeds this")
    max_abs_vector: float = Field(100.0, gt=0.0, description="a vector observation beyond this is out of bounds")
    ratio: float = Field(2.0, ge=0.0, description="synthetic steps allowed per committed real step (rate limit)")
    batch: int = Field(16, ge=1, le=4096, description="branches imagined together")
    seed: int = 0
