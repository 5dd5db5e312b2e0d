"""Settings of the world model: pydantic only (no torch), so loading a config stays cheap.

A checkpoint stores the `WorldModelConfig` it was built from; the architecture is rebuilt from
it and the tensors must then match it exactly (see checkpoint.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Generator = Literal["regression", "diffusion", "consistency", "drift"]
Mode = Literal["demo", "loop", "cotrain"]


class _Strict(BaseModel):
    # a typo in a key must fail loudly instead of silently using a default
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AutoencoderConfig(_Strict):
    latent_channels: int = Field(4, ge=1, le=64, description="latent channels per camera view")
    width: int = Field(32, ge=4, le=512, description="channels at H/2 (twice that at H/4)")
    vector_latent_dim: int = Field(8, ge=1, le=256, description="MLP latent of the vector observations")
    residual_decode: bool = Field(
        True,
        description=(
            "imagined frame (or vector) = last real one + decode(z_t) - decode(z_last_real); static parts stay exact"
        ),
    )
    vector_grid: int = Field(4, ge=1, le=64, description="latent grid side when there is no camera")
    vector_identity: bool = Field(
        False, description="the vector latent is the normalised vector itself (vector_latent_dim is not used): no "
        "reconstruction error, and the dynamics predicts normalised changes of the state (MBPO's model); for "
        "state observations, where an encoder has nothing to compress")


class DynamicsConfig(_Strict):
    backbone: Literal["auto", "conv", "mlp"] = Field(
        "auto", description="conv: FiLM residual convolutions over the latent grid (cameras); mlp: an MLP on the "
        "flattened history, actions and domain (state-only models with a 1x1 grid, MBPO's dynamics network); "
        "auto: mlp for a state-only model on a 1x1 grid (autoencoder.vector_grid 1), conv otherwise")
    history: int = Field(3, ge=1, le=32, description="latent frames in the sliding context window")
    width: int = Field(64, ge=8, le=1024, description="channels of the shared backbone")
    blocks: int = Field(6, ge=1, le=32, description="FiLM residual blocks of the denoising trunk")
    cond_dim: int = Field(128, ge=8, le=2048, description="size of the action/domain/noise embedding")
    context_noise: float = Field(0.1, ge=0.0, le=2.0, description="std of noise on context latents in training")
    context_noise_infer: float = Field(0.0, ge=0.0, le=2.0, description="same, at imagination time")
    start_pad_prob: float = Field(0.2, ge=0.0, le=1.0, description="share of windows trained as episode starts")
    ensemble: int = Field(1, ge=1, le=16, description="dynamics members; >1 gives disagreement")
    predict: Literal["first", "mean"] = Field(
        "first", description="what an imagined step is: first, member 0's prediction; mean, the mean of every "
        "member's next latent and heads (members differ only in their initial weights, so the mean averages "
        "out each one's own error, at one forward pass per member)")
    velocity_prior: float = Field(
        0.0, ge=0.0, le=1.0, description="each step predicts its change beyond this times the last frame's change "
        "(a constant-velocity prior, damped below 1): at 0 the untrained model copies the last frame, at 1 it "
        "extrapolates the last step. On the state profile 1 lowered the one-step held-out error on 5 of 6 runs "
        "(to 0.18-0.40x copying's) and raised the 8-step error on 4; with `input_clip` it lowers both (docs/loop.md). "
        "0 (default); the loop's state model uses 0.7")
    domains: int = Field(2, ge=1, le=64, description="size of the domain embedding table (0 real, 1 sim)")
    input_clip: float = Field(
        5.0, ge=0.0, le=100.0, description="the context latents the dynamics reads are clipped to +-this many "
        "standard deviations (0: off), as RL observation normalisers clip: a state far outside the training data "
        "(a puck tipped on its side) no longer drives the network into extrapolation. The imagined state is "
        "never clipped")


class GeneratorConfig(_Strict):
    kind: Generator = "regression"
    diffusion_steps: int = Field(32, ge=1, le=1000, description="DDIM sampler steps at imagination time")
    diffusion_train_steps: int = Field(1000, ge=2, le=10_000, description="discrete noise levels in training")
    consistency_steps: int = Field(1, ge=1, le=16, description="consistency sampler steps (1 = one pass)")
    consistency_sigma_max: float = Field(4.0, gt=0.0)
    consistency_sigma_min: float = Field(0.002, gt=0.0)
    consistency_x0_weight: float = Field(0.5, ge=0.0, description="weight of the denoising anchor loss")
    drift_group: int = Field(8, ge=2, le=256, description="generated samples per context (negatives)")
    drift_temperatures: list[float] = Field(default_factory=lambda: [0.02, 0.05, 0.2])
    drift_no_action_negative: bool = Field(True, description="the unchanged last frame is a negative")
    drift_motion_weight: float = Field(4.0, ge=0.0, description="extra loss weight on moving latent cells")


class HeadsConfig(_Strict):
    """The success and done heads: how their rare positives are trained and where they are cut."""

    positive_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description=(
            "share of the head batch drawn from windows that end on a success or done step "
            "(0 = uniform windows only); the calibrated threshold undoes the shifted prior"
        ),
    )
    calibrate: bool = Field(True, description="after dynamics training, set the thresholds on held-out windows")
    min_precision: float | None = Field(
        None, gt=0.0, le=1.0, description="calibrate to the highest recall at this precision instead of the best F1"
    )
    success_threshold: float = Field(0.5, gt=0.0, lt=1.0, description="success probability that labels success")
    done_threshold: float = Field(0.5, gt=0.0, lt=1.0, description="done probability that labels done")


class UncertaintyConfig(_Strict):
    """Where the synthesiser's uncertainty veto cuts (`synth.max_uncertainty: calibrated`): per imagined
    step, a quantile of the dynamics members' disagreement on held-out real episodes rolled out open
    loop under their recorded actions. A branch more uncertain than that is off the data."""

    calibrate: bool = Field(True, description="after dynamics training, measure the cuts on held-out episodes")
    quantile: float = Field(0.95, gt=0.0, lt=1.0, description="quantile of held-out disagreement at each step")
    horizon: int = Field(16, ge=1, le=256, description="steps measured; later steps use the last one's cut")
    per_episode: int = Field(16, ge=1, le=256, description="start points per held-out episode")
    thresholds: list[float] = Field(
        default_factory=list, description="set by calibration: the cut at imagined step t (t = 0 first); empty = none"
    )


class TrainConfig(_Strict):
    batch: int = Field(32, ge=1, le=4096)
    ae_steps: int = Field(1500, ge=0)
    ae_lr: float = Field(2e-3, gt=0.0)
    dyn_steps: int = Field(1500, ge=0)
    dyn_lr: float = Field(1e-3, gt=0.0)
    rollout_steps: int = Field(1, ge=1, le=16, description="steps unrolled on own predictions per window")
    head_weight: float = Field(0.1, ge=0.0, description="weight of reward/success/done losses")
    grad_clip: float = Field(1.0, gt=0.0)
    seed: int = 0
    holdout_every: int = Field(5, ge=0, description="episode ids with id % n == n - 1 are held out; 0 = none")
    groups: dict[str, float] = Field(
        default_factory=lambda: {"demo": 1.0}, description="group -> batch weight (mode demo / loop)"
    )
    sim_weight: float = Field(0.5, ge=0.0, le=1.0, description="share of sim windows in cotrain mode")
    loop_refresh_every: int = Field(100, ge=1, description="loop mode: steps between store refreshes")
    device: str = Field("cpu", description="torch device, e.g. cpu or cuda")


class WorldModelConfig(_Strict):
    version: Literal[1] = 1
    image_keys: list[str] = Field(default_factory=lambda: ["image_corner"])
    vector_keys: dict[str, int] = Field(default_factory=lambda: {"proprio": 4}, description="key -> size")
    quaternions: dict[str, list[int]] = Field(
        default_factory=dict, description="vector key -> offsets of unit quaternions (x, y, z, w) in it, made "
        "canonical (w >= 0) frame by frame and continuous along each window (the sign nearest the neighbour's), "
        "and compared sign-free in evaluation (rotations.py): q and -q are one rotation")
    previous_frame: dict[str, tuple[int, int, int]] = Field(
        default_factory=dict, description="vector key -> (at, of, size): the next step's values at..at+size repeat "
        "this step's values of..of+size (an observation that carries its previous frame, as Meta-World's state "
        "does). A model whose latent is the vector itself (autoencoder.vector_identity, no cameras) copies them "
        "instead of predicting them, so every imagined state agrees with the one before it")
    image_size: int = Field(64, ge=8, le=512)
    action_dim: int = Field(4, ge=1, le=64)
    autoencoder: AutoencoderConfig = Field(default_factory=AutoencoderConfig)
    dynamics: DynamicsConfig = Field(default_factory=DynamicsConfig)
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    heads: HeadsConfig = Field(default_factory=HeadsConfig)
    uncertainty: UncertaintyConfig = Field(default_factory=UncertaintyConfig)

    @model_validator(mode="after")
    def _check(self) -> WorldModelConfig:
        if not self.image_keys and not self.vector_keys:
            raise ValueError("a world model needs at least one image or vector observation key")
        if self.image_keys and self.image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4 (the encoder halves it twice), got {self.image_size}")
        if self.dynamics.backbone == "mlp" and not self._state_on_one_cell():
            raise ValueError("dynamics.backbone mlp is for state-only models on a 1x1 grid: set image_keys [] and "
                             "autoencoder.vector_grid 1")
        if any(n < 1 for n in self.vector_keys.values()):
            raise ValueError(f"vector sizes must be >= 1, got {self.vector_keys}")
        for key, starts in self.quaternions.items():
            if key not in self.vector_keys:
                raise ValueError(f"quaternions name {key!r}, which is not a vector key ({sorted(self.vector_keys)})")
            if bad := [s for s in starts if s < 0 or s + 4 > self.vector_keys[key]]:
                raise ValueError(f"quaternions at {bad} do not fit in {key!r} ({self.vector_keys[key]} values)")
        for key, (at, of, size) in self.previous_frame.items():
            if key not in self.vector_keys:
                raise ValueError(f"previous_frame names {key!r}, which is not a vector key "
                                 f"({sorted(self.vector_keys)})")
            n = self.vector_keys[key]
            if size < 1 or min(at, of) < 0 or max(at, of) + size > n:
                raise ValueError(f"previous_frame {(at, of, size)} does not fit in {key!r} ({n} values)")
        return self

    @property
    def copies_previous_frame(self) -> bool:
        """Whether `previous_frame` applies: only where the latent is the normalised vector itself."""
        return bool(self.previous_frame) and not self.image_keys and self.autoencoder.vector_identity

    def _state_on_one_cell(self) -> bool:
        return not self.image_keys and self.autoencoder.vector_grid == 1

    @property
    def backbone(self) -> str:
        """The dynamics backbone `dynamics.backbone` resolves to (auto: by the latent's shape)."""
        if self.dynamics.backbone != "auto":
            return self.dynamics.backbone
        return "mlp" if self._state_on_one_cell() else "conv"

    @property
    def vector_dim(self) -> int:
        return sum(self.vector_keys.values())

    @property
    def latent_grid(self) -> int:
        return self.image_size // 4 if self.image_keys else self.autoencoder.vector_grid

    @property
    def latent_channels(self) -> int:
        """Channels of the packed latent: per camera, then one block for all vector keys."""
        ae = self.autoencoder
        vector = (self.vector_dim if ae.vector_identity else ae.vector_latent_dim) if self.vector_keys else 0
        return ae.latent_channels * len(self.image_keys) + vector

    def architecture(self) -> dict:
        """The fields that fix tensor shapes or what they mean; a checkpoint must agree on all of them."""
        return self.model_dump(
            include={"version", "image_keys", "vector_keys", "quaternions", "previous_frame", "image_size",
                     "action_dim", "autoencoder", "dynamics"}
        ) | {"generator_kind": self.generator.kind}
