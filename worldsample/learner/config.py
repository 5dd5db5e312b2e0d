"""Learner settings. Network and SAC defaults follow HIL-SERL/RLPD (ALGORITHMS.md §2); the
behaviour-cloning warm start (pretraining, critic warm-up, BC term) is WorldSample's addition,
measured in the README: without it, SAC fine-tuning from few demonstrations loses what BC learned."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LearnerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    obs_keys: list[str] = Field(["state"], min_length=1, description="vector observation keys fed to actor and critics")
    hidden: list[int] = Field([256, 256], min_length=1)
    layer_norm: bool = Field(True, description="LayerNorm in the critic (and actor) MLPs")
    critics: int = Field(
        2, ge=2, le=20, description="critic ensemble size; 2 is RLlib's twin-Q SAC (HIL-SERL), 10 is RLPD"
    )
    critic: Literal["rllib", "mlp"] = Field(
        "mlp",
        description="mlp (default): an MLP of `hidden` on [obs, action] (HIL-SERL/RLPD), learner/mlp_critic.py; "
        "rllib: RLlib 2.60's SAC Q-network (obs and action streams joined by fusion layers of 256 tanh units). "
        "5 seeds, 4,000 real steps: mlp 83 % final success in about half the training time of rllib's 63 % "
        "(docs/results.md)",
    )
    target_subset: int = Field(
        2, ge=1, description="Bellman target: min over a random subset of this many target critics"
    )
    actor_q: Literal["mean", "min"] = Field(
        "mean", description="with critics > 2, the Q the actor climbs: the ensemble's mean (RLPD) or its minimum "
        "(SAC-N's pessimism, against an actor that chases the critics' errors off the demonstrated actions); with 2, "
        "RLlib's twin always takes the minimum. Without "
        "a human the minimum lost as much of the behaviour-cloned policy as the mean; with one it drove 9-14 points "
        "less of each quarter and ended 5 points lower (IQM, 5 seeds; docs/results.md)")
    gamma: float = Field(
        0.97, gt=0.0, le=1.0, description="discount (HIL-SERL's); 0.99 carries the sparse success further back "
        "along push-v3's 60-step episodes but measured no better without a human (docs/results.md)")
    backup_entropy: bool = Field(
        True, description="the Bellman target includes the next state's entropy bonus (-alpha log pi), as RLlib's "
        "and the SAC paper's; false: the plain return (SERL's and HIL-SERL's default), so with a sparse reward the "
        "critics measure success alone. False lowered final success on the state profile, with and without the "
        "human (docs/results.md)")
    actor_every: int = Field(
        1, ge=1, description="the actor and the temperature step on one learner update in this many (the last of "
        "each block, counted over the run); the critics step on every one. RLPD and SERL update the actor once per "
        "real step whatever the update-to-data ratio: actor_every = utd. At utd 4, actor_every 4 lowered final success "
        "on the state profile (docs/results.md)")
    obs_norm: Literal["off", "all", "critics"] = Field(
        "off", description="standardise observations by the demonstrations' mean and std per dimension (std at "
        "least obs_norm_min_std), clipped to +-obs_clip: `all`: actor and critics (the exported policy carries the "
        "statistics); `critics`: the critics only (critic: mlp), the actor keeps the raw observation. State "
        "profile, final success (IQM): `all` made behaviour cloning overfit the demos (2.7x the held-out action "
        "error) and lost 31 points; `critics` gained 15 without the human (5 seeds, interval -25 to 46) and 2 "
        "with it (10 seeds, -13 to 15) with a slightly larger human share (docs/results.md)")
    obs_norm_min_std: float = Field(
        0.05, gt=0.0, description="with obs_norm: the floor of each dimension's std, so a dimension the "
        "demonstrations hardly move (a puck's orientation) is not blown up where the robot moves it")
    obs_clip: float = Field(5.0, gt=0.0, description="with obs_norm: the normalised observation's bound")
    n_step: int = Field(1, ge=1, description="steps summed per Bellman backup (with action_chunk > 1: the chunk's)")
    action_chunk: int = Field(
        1, ge=1, le=16, description="actions per decision (Q-chunking, Li et al. 2025): the actor proposes this "
        "many steps' actions at once, the robot plays them open-loop (a human takeover drops the rest), and the "
        "critics value the whole sequence with a backup over its steps, so a decision moves the return by "
        "several steps' worth where one step's action barely moves it. State profile, 5 seeds: 3 ended where 1 does "
        "with the human, 5 lower; without the human both lost what behaviour cloning gave (docs/results.md). 1: one "
        "action per step")
    lr: float = Field(3e-4, gt=0.0)
    tau: float = Field(0.005, gt=0.0, le=1.0)
    initial_alpha: float = Field(
        0.01, gt=0.0, description="the temperature's start (HIL-SERL's 0.01). Without a human, 0.1 kept more of "
        "the behaviour-cloned policy on the state profile (10 demos, 5 seeds); with one it only raised the human's "
        "share (docs/results.md)")
    alpha_lr: float | None = Field(
        None,
        gt=0.0,
        description="learning rate of the temperature (log alpha); None: lr. 10x lr brings the exploring policy's "
        "entropy to its target within a few thousand updates: less exploration noise and fewer takeovers, but "
        "lower final success in the 5-seed benchmark (docs/loop.md)",
    )
    target_entropy: float | None = Field(None, description="default -|A| / 2 (HIL-SERL's)")
    batch_size: int = Field(256, ge=2)
    utd: int = Field(2, ge=1, description="gradient updates per new real environment step")
    updates_per_call: int = Field(
        1, ge=1, description="gradient steps inside one learner call (SACAgent.update_many): the same steps "
        "as one call each, one batch conversion and metrics reduction per call; in-process, 8 per call measured "
        "no faster than 1 (bench/learner.py --per-call, docs/results.md)",
    )
    metrics_every: int = Field(
        8, ge=1, description="in the loop, learner calls per reduction of RLlib's learner metrics (losses, Q, "
        "alpha), and one at the end of each learning round: RLlib's MetricsLogger.reduce costs about a sixth of a "
        "[128, 128] update on CPU; each report covers the calls since the last one. 1: every call, as RLlib does",
    )
    bc_weight: float = Field(
        1.0,
        ge=0.0,
        description=(
            "behaviour-cloning term on demo/intervention samples in the actor loss (x mean |Q|, TD3+BC); 0: plain SAC"
        ),
    )
    anchor_weight: float = Field(
        0.0, ge=0.0, description="the actor held near its behaviour-cloned self on every sampled state: the squared "
        "distance of its mean action to that of a frozen copy of the actor taken after bc_pretrain_steps, x mean |Q| "
        "(as bc_weight), added to the actor loss. bc_weight holds the actor to the demos' actions on the demos' "
        "states only; this also holds it at the states its own episodes reach, where the critics know least. "
        "0 (default): off; without the human, from 10 demos, 1-20 kept behaviour cloning's level where the "
        "defaults lose it, and with the human it held the actor away from the corrections (docs/results.md)")
    actor_ema: float = Field(
        0.0, ge=0.0, lt=1.0, description="the policy the robot and the evaluations run is a Polyak average of the "
        "actor: after every actor step it moves this fraction of the way to the learning actor (started at the "
        "behaviour-cloned actor), so one noisy actor update changes what the arm does by a fraction of itself "
        "(policy churn, Schaul et al. 2022). The learner's own losses, entropy and Q-values use the learning actor. "
        "0: the learning actor itself (a bare LearnerConfig); the loop's defaults use 0.005, which on 10 seeds ended "
        "where 0 does with a third less change between evaluations (docs/results.md)")
    cql_weight: float = Field(
        0.0, ge=0.0, description="conservative critics (CQL, Kumar et al. 2020): each critic's soft maximum of Q over "
        "uniform and policy actions minus its Q on the data's action, times this, added to its loss, so the actor "
        "cannot climb the critics' errors where no action was played. 0 (default): off; without the human, 1 and 5 "
        "ended where the defaults do at 2.7x the training time, their Q far below the return's range (docs/results.md)")
    cql_calibrated: bool = Field(
        False, description="with cql_weight: Cal-QL (Nakamoto et al. 2023), the policy actions' Q in that term held at "
        "no less than the sampled step's Monte-Carlo return (the discounted reward its episode went on to earn), so "
        "the critics are pushed down only below what the data shows the state is worth. It kept Q in the return's "
        "range and behaviour cloning's start through the first evaluation, and ended no higher (docs/results.md)")
    bc_std_weight: float = Field(
        0.0,
        ge=0.0,
        description="likelihood of the demo/intervention actions with the mean held fixed, in the actor loss: the "
        "log-std follows the imitation error, so the policy's entropy falls as it gets good (PPL paces on it); "
        "0 (default): off, until a benchmark shows it helps (docs/loop.md)",
    )
    bc_pretrain_steps: int = Field(
        3000,
        ge=0,
        description="actor steps of maximum-likelihood behaviour cloning on the demos before online learning",
    )
    critic_warmup_updates: int = Field(
        300, ge=0, description="first updates train only the critics (actor and temperature fixed)"
    )
    num_learners: int = Field(0, ge=0, description="0: the learner runs in-process; >0: remote Ray learners")
    num_gpus_per_learner: float = Field(
        0.0, ge=0.0, description="GPU share of each learner (with num_learners >= 1, or 1 for the local one)"
    )
    seed: int = 0

    @model_validator(mode="after")
    def _subset_fits(self) -> LearnerConfig:
        if self.action_chunk > 1 and self.n_step not in (1, self.action_chunk):
            raise ValueError(f"learner.action_chunk={self.action_chunk} backs up over the chunk's steps; n_step "
                             f"({self.n_step}) must be 1 or the chunk's length")
        if self.anchor_weight and not self.bc_pretrain_steps:
            raise ValueError("learner.anchor_weight holds the actor near its behaviour-cloned copy: set "
                             "bc_pretrain_steps > 0")
        if self.cql_calibrated and not self.cql_weight:
            raise ValueError("learner.cql_calibrated calibrates the conservative term: set cql_weight > 0")
        if self.obs_norm == "critics" and self.critic != "mlp":
            raise ValueError("obs_norm: critics needs critic: mlp (RLlib's own critic takes the actor's input)")
        if self.target_subset > self.critics:
            raise ValueError(f"target_subset ({self.target_subset}) cannot exceed critics ({self.critics})")
        if self.num_learners and self.bc_pretrain_steps:
            # measured: RLlib's remote learner actor dies on the first update after pretraining steps
            # taken outside its update loop; until that is understood, remote learners start without
            raise ValueError("bc_pretrain_steps needs the in-process learner (num_learners=0); "
                             "set bc_pretrain_steps=0 to use remote learners")
        return self

    @property
    def backup_steps(self) -> int:
        """Steps summed per Bellman backup: the chunk's length when actions come in chunks, else n_step."""
        return self.action_chunk if self.action_chunk > 1 else self.n_step
