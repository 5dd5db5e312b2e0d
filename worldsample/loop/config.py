"""Settings of `worldsample train`: budget, rates of each actor, and the parts' own configs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from worldsample.learner.config import LearnerConfig
from worldsample.policy.explore import explore_scale_at
from worldsample.ppl.config import PPLConfig
from worldsample.sim.layout import PREVIOUS_FRAME, QUATERNIONS, STATE_DIM
from worldsample.synth.config import SynthConfig
from worldsample.world_model.config import WorldModelConfig


def _small_world_model() -> WorldModelConfig:
    """CPU-sized continual post-training: a few hundred steps per round, on the state itself (the
    normalised state as the latent, an MLP for the dynamics, the object's quaternions canonical, the
    previous frame the state carries copied), in an eighth of the encoder-and-convolution model's
    training time (docs/loop.md, "The state profile's world model")."""
    cfg = WorldModelConfig(image_keys=[], vector_keys={"state": STATE_DIM}, quaternions={"state": QUATERNIONS},
                           previous_frame={"state": PREVIOUS_FRAME})
    cfg.autoencoder.vector_latent_dim = 32  # the encoder's latent, when vector_identity is turned off
    cfg.autoencoder.vector_identity, cfg.autoencoder.vector_grid = True, 1
    # dynamics.backbone auto: an MLP on this 1x1 grid, convolutions once cameras are named
    cfg.train.ae_steps, cfg.train.dyn_steps, cfg.train.batch = 300, 300, 32
    cfg.train.groups = {"demo": 1.0}
    cfg.dynamics.ensemble = 2  # two members: their disagreement is what the synthesiser's uncertainty veto cuts on
    # and their mean is the step: on 14 retrained stores and seeds the 8-step error is 0.49x copying's against
    # member 0's 0.50x, the worst 0.62x against 0.71x (docs/loop.md, "The members' mean as the step")
    cfg.dynamics.predict = "mean"
    # a damped constant-velocity prior and a wider MLP (docs/loop.md, "States it never saw"): in 5 runs' own
    # summaries 0.20-0.40x copying's error at 1 step and 0.33-0.59x at 8 (width 64: 0.19-0.36x, 0.47-0.58x)
    cfg.dynamics.velocity_prior, cfg.dynamics.width = 0.7, 128
    return cfg


def _cpu_learner() -> LearnerConfig:
    """Sized for 2 CPU cores: four updates per real step with RLPD's ensemble of 10 critics, the best of the
    four settings measured on 5 seeds (docs/results.md, "Update-to-data ratio"); configs/loop_gpu.yaml has
    HIL-SERL's sizes. The robot runs the actor's Polyak average (actor_ema 0.005): on 10 seeds it ended where
    the learning actor does with a third less churn between evaluations (docs/results.md, "The averaged actor")."""
    return LearnerConfig(hidden=[128, 128], batch_size=128, utd=4, critics=10, actor_ema=0.005)


class SearchConfig(BaseModel):
    """Best-of-N at the loop's simulated arm (worldsample/loop/search.py): N candidates around the
    policy's action, imagined `horizon` steps in the run's latest world model and ranked by the
    learner's critic where they end (`value`) or by imagined success (`success`); the first action of
    the best is executed. Offline, on the last policies of five 4,000-step runs, value at horizon 3 or
    10 raised success on 50 held-out states by 5 points on the mean, where the critic alone on the
    same candidates lost 9 and a random candidate 2. In the loop (5 seeds, 4,000 steps) evaluating
    through it ended 4 points higher on the mean but not sooner at 80 %, and collecting through it
    cost 19 points of final success: off by default (docs/results.md)."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(0, ge=0, le=64, description="candidates per decision; 0: off, the policy alone")
    horizon: int = Field(3, ge=1, le=50, description="imagined steps per candidate")
    spread: float = Field(0.1, gt=0.0, le=2.0, description="candidates: the policy's action plus N(0, spread^2)")
    score: Literal["value", "success"] = Field(
        "value", description="value: the learner's return so far plus gamma^H Q where the candidate ends (the "
        "latest trainer checkpoint's critic); success: imagined success, then predicted return")
    collect: bool = Field(True, description="the collector acts through the search (the episodes it records)")
    evaluate: bool = Field(True, description="evaluations act through it (what the success curve measures)")


LATENT_KEY = "latent"
SUCCESS_PRED_KEY = "success_pred"  # loop.reward=classifier: the classifier's per-step decision


class VisionConfig(BaseModel):
    """The image profile: the learner sees `latent` (a frozen pixel encoder's output, worldsample.vision)
    and proprioception, never the task state. The encoder is pretrained on the demos (behaviour cloning
    under random shift) before learning starts, saved in RUN/vision/encoder and frozen from then on."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="learn from cameras + proprioception through a frozen pixel encoder")
    cameras: list[str] = Field(["corner4"], min_length=1, max_length=8, description="env cameras the encoder sees")
    latent_dim: int = Field(50, gt=0, le=4096)
    pretrain_steps: int = Field(300, ge=1, le=1_000_000, description="encoder pretraining steps (CPU-sized)")
    pretrain_batch: int = Field(64, ge=1, le=65_536)
    shift_pad: int = Field(4, ge=0, le=32, description="random shift of up to this many pixels while pretraining")
    pretrain_groups: list[Literal["demo", "sim"]] = Field(
        ["demo"], min_length=1, description="store groups the encoder is pretrained on; `sim` (randomised-domain "
        "expert episodes, demos.sim_episodes) adds breadth (MixWorld's sim-and-real co-training)")
    channels: list[int] = Field([32, 32, 32, 32], min_length=1, max_length=8)
    strides: list[int] = Field([2, 2, 1, 1], min_length=1, max_length=8)
    threads: int | None = Field(None, ge=1, description="torch CPU threads while pretraining (None = as set)")
    success_steps: int = Field(800, ge=1, le=1_000_000, description="loop.reward=classifier: the success "
                               "classifier's training steps (worldsample/vision/success.py)")
    success_retrain_every_episodes: int = Field(
        0, ge=0, le=1_000_000, description="loop.reward=classifier: train the success classifier again on demo + "
        "real (the robot's success and the operator's marks, as the readers apply them) every this many new real "
        "episodes, and re-derive every cached step's reward from it; 0: trained once on the demos")
    success_labelled_only: bool = Field(
        False, description="on retraining, learn from the real episodes an operator labelled only (a robot that "
        "reports no success of its own)")

    @model_validator(mode="after")
    def _groups_once(self) -> VisionConfig:
        if len(set(self.pretrain_groups)) != len(self.pretrain_groups):
            raise ValueError(f"loop.vision.pretrain_groups {self.pretrain_groups}: a group is named twice")
        return self


class LoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    robot: Literal["sim", "bridge"] = Field(
        "sim", description="sim: a local actor steps the simulated arm; bridge: learn from what the bridge commits"
    )
    bridge_wait_s: float = Field(
        120.0, gt=0, description="robot=bridge: how long to wait for the bridge to create the `real` group"
    )
    real_steps: int = Field(4000, ge=1, description="budget of real environment steps")
    reward: Literal["success", "task", "classifier"] = Field(
        "success", description="success: sparse 1 at the successful (terminal) step, as HIL-SERL's reward classifier; "
        "task: the environment's shaped reward times reward_scale (with terminate_on_success a positive shaped reward "
        "teaches the policy to avoid finishing); classifier (loop.vision only): the run's success classifier's "
        "decision on each step's [latent, proprio], trained on the demos once after the encoder (docs/vision.md)")
    reward_scale: float = Field(0.1, gt=0.0, description="reward=task: the learner sees the task's reward times this")
    shaping: Literal["off", "distance", "progress"] = Field(
        "off", description="potential-based shaping added to the reward (loop/shaping.py; no optimal policy changes): "
        "distance: Phi = -shaping_scale * (hand to object + object to goal, metres) from the simulated arm's "
        "39-dim state (learner.obs_keys must hold `state`), which a real arm has only with an object tracker; "
        "progress: Phi = shaping_scale * V, V regressed from the learner's observation on the successful "
        "episodes (gamma^(steps still to go)), fitted on the demos and again every shaping_every_episodes")
    shaping_scale: float = Field(1.0, gt=0.0, description="shaping: the potential's scale (distance: reward per "
                                 "metre to go; progress: reward for the whole way)")
    shaping_every_episodes: int = Field(5, ge=1, description="shaping=progress: fit the value again after this "
                                        "many new real episodes")
    explore: bool = Field(True, description="the robot samples from the stochastic policy")
    explore_scale: float = Field(
        1.0, gt=0.0, le=1.0, description="with explore: the robot samples with the policy's spread (before the tanh "
        "squash) times this; the learner's policy and its entropy target are unchanged. Below 1 the arm strays "
        "less from the policy's mean; at 0.5 the default human's share of the state profile's runs moved by only "
        "0-7 points, at 0.3 and 0.1 final success fell by 30-50 points (docs/results.md)")
    explore_scale_end: float | None = Field(
        0.1, gt=0.0, le=1.0, description="with explore: the spread's scale the run ends at, reached from "
        "explore_scale linearly over `explore_anneal` (fractions of real_steps, by committed real steps); "
        "null: explore_scale all run. At 0.1 (the default since the evening of 2026-12-07) the state profile's "
        "human drove 23 % of the last quarter's steps against 55 % with the policy's own noise (lower on 10 of 10 "
        "seeds), final success IQM +4 points (95 % CI -8 to 14); 0.3 gave 39 %. A fall over 0.3 to 0.6 of the "
        "budget did as well there and ended the main job at 60 % twice (docs/results.md)")
    explore_anneal: tuple[float, float] = Field(
        (0.5, 0.75), description="with explore_scale_end: the share of the budget at which the scale starts to "
        "fall and the one at which it reaches explore_scale_end")
    max_lag_steps: int | None = Field(
        300, ge=0, description="robot=bridge: an unattended episode starts only while the newest policy was trained "
        "on all but at most this many committed real steps (the bridge's episode.max_policy_lag_steps), so the "
        "learner holds `learner.utd` on the robot's clock; 300 is two default episodes: one on the arm while the "
        "learner learns the last; null: the arm never waits and the learner falls behind when it is slower")
    interventions: bool = Field(True, description="a simulated human takes over when the policy strays (HIL-SERL)")
    intervention_penalty: float = Field(
        0.0, ge=0.0, le=10.0, description="the reward of the policy's last step before each takeover is lowered by "
        "this much (RLIF: the human's stepping in says the policy went wrong), so the critics learn which motions "
        "call the human; 0: the task's reward alone (HIL-SERL). At 1, with the human, state profile, 5 seeds: the "
        "human's share of the last quarter 34 % against 46 %, final success IQM 65 % against 77 % (docs/results.md)")
    imitate_successes: bool = Field(
        False, description="the online episodes the policy won without a human step join the demos and "
        "interventions: they share the demo half of each batch by size and get the behaviour-cloning term "
        "(AW-Opt's positive filtering; the operator's label decides where there is one). Without a human "
        "(state profile, 10 demos, 2,000 steps, 5 seeds) it raised the sampling policy's wins, not the final "
        "success of its mean (docs/results.md)")
    retry_failed: int = Field(
        0, ge=0, le=10, description="robot=sim: an episode the policy did not win alone (no success, or a human "
        "step) is followed by up to this many more from the same initial state (a reset curriculum: the "
        "operator puts the scene back where it was) before the next new start; 0: every episode a new start. "
        "State profile, 5 seeds: without the human the retries won 0-3 times a run and final success stayed "
        "at the same level; with the human it halved the distinct starts and ended 7-13 points lower "
        "(docs/results.md)")
    relabel_goals: float = Field(
        0.0, ge=0.0, le=1.0, description="hindsight goal relabelling (HER; loop/relabel.py): this share of each "
        "batch's online rows (the real episodes' transitions, not the imitated ones) gets as its goal where the "
        "object is at a later step of its episode, with reward and end recomputed for it (the object within "
        "relabel_radius). Reads the simulated arm's 39-dim state (learner.obs_keys must hold `state`), which a real "
        "arm has only with an object tracker and a goal in the state; 0: off. State profile, 0.8: without the human "
        "(10 demos, 10 seeds) final IQM 69 % against 53 %, level with the anchor; with the human 79 % against 83 % "
        "(docs/results.md)")
    relabel_radius: float = Field(0.05, gt=0.0, description="relabel_goals: the object within this many metres of "
                                  "the goal is a success (push-v3's own test: 0.05)")
    relabel_moved_only: bool = Field(
        False, description="relabel_goals: the goal only from a later step where the object is more than "
        "relabel_radius from where it is at the row's own step, so no relabelled row is won before it acts; false: "
        "any later step (HER's `future`; most goals are then where the object already is). Ended lower than plain "
        "relabelling on 5 of the 6 runs tried (docs/results.md)")
    eval_episodes: int = Field(
        20, ge=0, description="held-out initial states per evaluation of the deterministic policy"
    )
    eval_every_episodes: int = Field(5, ge=1)
    final_eval_episodes: int | None = Field(
        None, ge=1, description="held-out initial states of the evaluation at the end of the run (its first "
        "`eval_episodes` are the same states as every evaluation's); None: eval_episodes. A benchmark's final "
        "success on 50 states has a binomial spread of at most 7 points, on 20 states 11")
    export_every_episodes: int = Field(1, ge=1)
    wm_every_episodes: int = Field(10, ge=1, description="continual world-model post-training cadence")
    synth_every_episodes: int = Field(2, ge=1)
    synth_branches: int = Field(32, ge=1)
    wm_eval_horizons: list[int] = Field(
        [1, 8], description="world-model fidelity in the run summary at these horizons; [] skips it"
    )
    tensorboard: bool = Field(True, description="mirror metrics as TensorBoard scalars in RUN/tensorboard/")
    recommend: bool = Field(
        True, description="score each exported policy in the latest world model and keep RUN/policies/recommended "
        "on the best (needs a world model: ppl or naive)")
    recommend_starts: int = Field(8, ge=1, description="held-out real initial states per imagined score")
    recommend_budget_s: float = Field(30.0, gt=0, description="seconds of scoring per export, rescoring included")
    checkpoint_every_episodes: int = Field(5, ge=1)
    min_real_for_learning: int = Field(256, ge=1, description="transitions (demo + online) before the first update")
    seed: int = 0
    learner: LearnerConfig = Field(default_factory=_cpu_learner)
    ppl: PPLConfig = PPLConfig()
    synth: SynthConfig = SynthConfig()
    world_model: WorldModelConfig = Field(
        default_factory=_small_world_model,
        description="continual world model; image_keys [] (default) keeps it on vectors, any camera name makes it "
        "train on every camera in the store (minutes per round on CPU)")
    vision: VisionConfig = Field(default_factory=VisionConfig, description="the image profile (pixel encoder)")
    search: SearchConfig = Field(default_factory=SearchConfig, description="Best-of-N in the world model at the "
                                 "simulated arm (lock-step runs; n 0: off)")

    @model_validator(mode="after")
    def _anneal_in_order(self) -> LoopConfig:
        lo, hi = self.explore_anneal
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"loop.explore_anneal {list(self.explore_anneal)} must be two shares of the budget, "
                             "0 <= start <= end <= 1")
        if self.retry_failed and self.robot != "sim":
            raise ValueError("loop.retry_failed repeats the simulated arm's initial states (loop.robot sim); with "
                             "the bridge the operator resets the scene: set it to 0")
        return self

    def explore_scale_at(self, committed: int) -> float:
        """The robot's noise scale once `committed` real steps are in the store (`explore_scale_end`)."""
        return explore_scale_at(self.explore_scale, self.explore_scale_end, self.explore_anneal_steps, committed)

    @property
    def explore_anneal_steps(self) -> tuple[int, int]:
        """`explore_anneal` in committed real steps."""
        lo, hi = self.explore_anneal
        return round(lo * self.real_steps), round(hi * self.real_steps)

    @model_validator(mode="after")
    def _search_has_a_world_model(self) -> LoopConfig:
        if not self.search.n:
            return self
        if self.ppl.mode == "off":
            raise ValueError("loop.search imagines in the run's world model, which loop.ppl.mode=off does not train: "
                             "set loop.ppl.mode (naive or ppl) or loop.search.n=0")
        if self.vision.enabled or self.world_model.image_keys:
            raise ValueError("loop.search runs on the state profile (a world model and policy on vectors); "
                             "set loop.search.n=0 with loop.vision or world-model cameras")
        if self.learner.action_chunk > 1:
            raise ValueError("loop.search chooses one action per step; set loop.learner.action_chunk=1 or "
                             "loop.search.n=0")
        return self

    @model_validator(mode="after")
    def _shaping_reads_the_state(self) -> LoopConfig:
        if self.shaping != "off" and self.reward == "task":
            raise ValueError("loop.shaping adds a potential to the sparse success reward; loop.reward=task is "
                             "already the simulator's shaped reward: set loop.reward=success (or classifier) or "
                             "loop.shaping=off")
        if self.relabel_goals and (self.reward != "success" or "state" not in self.learner.obs_keys
                                   or self.learner.action_chunk > 1 or self.learner.cql_calibrated
                                   or self.intervention_penalty):
            raise ValueError("loop.relabel_goals recomputes the sparse success reward from the 39-dim task state "
                             "`state` for one action a step: it needs loop.reward=success, `state` in "
                             f"learner.obs_keys (got {self.learner.obs_keys}), learner.action_chunk=1, "
                             "learner.cql_calibrated=false (its returns are the real goal's) and "
                             "loop.intervention_penalty=0 (a relabelled reward would drop it); or set it to 0")
        if self.shaping == "distance" and "state" not in self.learner.obs_keys:
            raise ValueError(f"loop.shaping=distance reads the 39-dim task state `state`, which learner.obs_keys "
                             f"{self.learner.obs_keys} lack: add it or set loop.shaping=off")
        return self

    @model_validator(mode="after")
    def _vision_keeps_the_state_out(self) -> LoopConfig:
        keys = self.learner.obs_keys
        if not self.vision.enabled:
            if self.reward == "classifier":
                raise ValueError("loop.reward=classifier reads the success classifier on the frozen encoder's "
                                 f"{LATENT_KEY}, which only loop.vision.enabled makes: turn loop.vision on or use "
                                 "loop.reward=success")
            if LATENT_KEY in keys:
                raise ValueError(f"learner.obs_keys {keys} name {LATENT_KEY!r}, which only loop.vision.enabled makes")
            return self
        if self.vision.success_retrain_every_episodes and self.reward != "classifier":
            raise ValueError("loop.vision.success_retrain_every_episodes retrains the classifier that "
                             "loop.reward=classifier learns from; with loop.reward="
                             f"{self.reward} there is none: set loop.reward=classifier or leave it at 0")
        if "state" in keys:
            raise ValueError(f"loop.vision is on, but learner.obs_keys {keys} include the task state `state`: on the "
                             f"image profile the learner sees [{LATENT_KEY}, proprio] only")
        if LATENT_KEY not in keys:
            raise ValueError(f"loop.vision is on, but learner.obs_keys {keys} lack {LATENT_KEY!r}")
        if any(k.startswith("image_") for k in keys):
            raise ValueError(f"learner.obs_keys {keys}: cameras reach the learner through {LATENT_KEY!r} only")
        if self.world_model.image_keys:
            raise ValueError(f"loop.vision is on, but loop.world_model.image_keys {self.world_model.image_keys} name "
                             f"cameras: on the image profile the world model reads {LATENT_KEY} (the frozen encoder's "
                             "output) and proprioception, so its synthetic steps are in the learner's space")
        if self.ppl.mode != "off" and self.recommend:
            raise ValueError("loop.vision with loop.recommend: scoring exported policies in the world model needs "
                             f"imagined starts in the {LATENT_KEY} space, which is not built; set loop.recommend=false")
        return self

    @model_validator(mode="after")
    def _chunks_play_on_the_lock_step_arm(self) -> LoopConfig:
        k = self.learner.action_chunk
        if k > 1 and (self.robot != "sim" or self.vision.enabled or self.ppl.mode != "off"):
            raise ValueError(f"learner.action_chunk={k}: chunks of actions are played by the lock-step simulated "
                             "arm's collector and evaluator only, on the state profile, without the world model "
                             "(its branches and policy scores act one step at a time); got "
                             f"loop.robot={self.robot}, loop.vision.enabled={self.vision.enabled}, "
                             f"loop.ppl.mode={self.ppl.mode}: set loop.learner.action_chunk=1")
        return self

    @model_validator(mode="after")
    def _the_oracle_replays_the_lock_step_arm(self) -> LoopConfig:
        if self.synth.imaginer == "simulator" and (self.robot != "sim" or self.vision.enabled):
            raise ValueError("loop.synth.imaginer=simulator replays episodes on the lock-step simulated arm from their "
                             "reset seeds: it needs loop.robot=sim and the state profile (loop.vision off); got "
                             f"loop.robot={self.robot}, loop.vision.enabled={self.vision.enabled}")
        return self

    @model_validator(mode="after")
    def _world_model_sees_what_the_learner_sees(self) -> LoopConfig:
        # synthetic episodes must carry the learner's observation keys; sizes come from the store
        wm = self.world_model
        if self.vision.enabled:
            # exactly the learner's keys, `latent` sized by the encoder: the defaults' `state` (which a YAML
            # overlay cannot remove from the dict) never reaches the image profile's world model
            keys = {k: self.vision.latent_dim if k == LATENT_KEY else wm.vector_keys.get(k, 1)
                    for k in self.learner.obs_keys}
            if "state" in keys:  # refused above already; kept here so no later change can let it in
                raise ValueError("the image profile's world model never reads the task state `state`")
            if wm.vector_keys != keys:
                wm.quaternions = {k: q for k, q in wm.quaternions.items() if k in keys}  # the state's are gone
                wm.previous_frame = {k: v for k, v in wm.previous_frame.items() if k in keys}
                wm.vector_keys = keys
            return self
        missing = {k: 1 for k in self.learner.obs_keys if k not in wm.vector_keys and k != LATENT_KEY}
        if missing:
            wm.vector_keys = {**wm.vector_keys, **missing}
        return self
