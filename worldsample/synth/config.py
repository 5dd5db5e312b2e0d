"""Synthesis settings. Defaults from ALGORITHMS.md: s = 0.2, sigma = 0.05, horizon 5-15."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SynthConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    horizon: int = Field(10, ge=1, le=256, description="imagined steps per branch")
    scale: float = Field(0.2, ge=0.0, lt=1.0, description="xi ~ U(1 - s, 1 + s) per segment and dimension")
    sigma: float = Field(0.05, ge=0.0, description="per-step action noise std")
    context: int = Field(3, ge=1, le=32, description="real frames conditioning each branch")
    recent_episodes: int = Field(50, ge=1, description="branch points come from this many most recent real episodes")
    groups: list[str] = Field(["real", "demo"], description="groups whose episodes are branched")
    success_focus: float = Field(
        0.0, ge=0.0, le=1.0, description="share of branch points drawn from the last `horizon` steps before (and "
        "at) the success step of a successful source episode, where counterfactual actions can still succeed or "
        "just miss (the success pool's supply); the segment holds the episode's last action past its end. The rest "
        "are uniform over the recent episodes' steps")
    success_threshold: float | None = Field(
        None, gt=0.0, lt=1.0,
        description="success-head probability that labels success; None: the world model's thresholds for success "
        "and done, calibrated on held-out real windows (a predicted done also ends the branch)")
    max_uncertainty: float | Literal["calibrated"] | None = Field(
        "calibrated", description="the uncertainty veto: a branch is cut before its first step whose disagreement (the "
        "variance of the next normalised latent across the world model's ensemble members, dynamics.ensemble >= 2, or "
        "across samples of a stochastic generator) exceeds the cut, and dropped when that is its first step. "
        "`calibrated`: the world model's per-step cuts, a quantile of its disagreement on held-out real episodes "
        "(world_model.uncertainty); a number: that cut at every step. A model without disagreement (or without cuts) "
        "cannot be vetoed: its branches are written and counted as synth/unvetted. None turns the veto off")
    bounds_margin: float = Field(
        0.1, ge=0.0, description="an imagined vector value is out of bounds outside the per-dimension min/max over the "
        "source episodes (recent real and demo ones), widened on each side by this fraction of the key's whole range")
    max_abs_vector: float | None = Field(
        None, gt=0.0, description="optional hard cap on |value| of an imagined vector, on top of the observed range")
    pool_max_steps: int | None = Field(
        5000, ge=1, description="bound of the `synthetic` group (retention): past it the oldest world-model version's "
        "episodes go first. 5000 holds about the last three world models at the CPU loop's default cadence; None keeps "
        "every synthetic episode")
    imaginer: Literal["world_model", "simulator"] = Field(
        "world_model", description="what plays the branches: the run's world model, or (a diagnostic, bench only) the "
        "simulated arm itself, replayed from each episode's reset seed to the branch step (synth/sim_replay.py): what "
        "a perfect world model would imagine. Needs loop.robot=sim and the state profile; no uncertainty veto")
    actions: Literal["perturbed", "policy"] = Field(
        "perturbed", description="the branches' actions: `perturbed`, the source episode's logged actions scaled and "
        "jittered (scale, sigma); `policy`, sampled (exploring) from the newest exported policy acting on the imagined "
        "observations, step by step (MBPO-style branches that follow the current policy, from real states)")
    ratio: float = Field(2.0, ge=0.0, description="synthetic steps allowed per committed real step (rate limit)")
    batch: int = Field(16, ge=1, le=4096, description="branches imagined together")
    seed: int = 0
