"""config.json of an exported policy: what the actor eats, what it outputs, how it is built.

Tensor names in actor.safetensors (float32): `trunk.<i>.weight` (out, in) and `trunk.<i>.bias`
for each hidden layer, with `layer_norm` also `norm.<i>.weight` and `norm.<i>.bias` (out,)
applied before the activation; `mean.weight` (action_dim, last hidden) and `mean.bias`; with
`stochastic` also `log_std.weight` and `log_std.bias` of the same shapes; and, when
`obs_normalization` is set, `obs_mean` and `obs_std` (obs_dim,): the concatenated observation becomes
(x - obs_mean) / obs_std, clipped to [-obs_clip, obs_clip] when `obs_clip` is set. The action is
`low + (tanh(u) + 1) / 2 * (high - low)`, h the trunk output over the concatenated observation
keys in `obs` order, u = mean(h) (deterministic) or mean(h) + exp(clip(log_std(h), -5, 2)) * N(0, 1)
when a stochastic policy explores (SAC's tanh-squashed Gaussian, as RLlib computes it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FORMAT = "worldsample-policy"
FORMAT_VERSION = 1


class ObsInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    dim: int = Field(gt=0, le=65_536)


class PolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["worldsample-policy"] = FORMAT
    format_version: Literal[1] = FORMAT_VERSION
    kind: Literal["mlp_tanh"] = "mlp_tanh"
    obs: list[ObsInput] = Field(min_length=1, description="vector observation keys, concatenated in this order")
    action_dim: int = Field(gt=0, le=1024)
    hidden: list[int] = Field(default=[256, 256], max_length=16)
    activation: Literal["relu", "tanh", "elu", "silu"] = "relu"
    action_low: list[float]
    action_high: list[float]
    obs_normalization: bool = False
    obs_clip: float | None = Field(None, gt=0.0, description="with obs_normalization: clip the normalised observation")
    layer_norm: bool = False
    layer_norm_eps: float = Field(1e-3, gt=0.0)
    stochastic: bool = Field(False, description="has a log_std head: can sample exploratory actions")
    action_chunk: int = Field(
        1, ge=1, le=64, description="actions per output (learner.action_chunk): the output holds this many steps' "
        "actions, to be played in order; only a runner that plays chunks may load a policy with more than 1")
    version: int = Field(0, ge=0, description="set by the registry when published")
    source: dict[str, Any] = Field(default_factory=dict, description="provenance (learner step, run...)")

    @model_validator(mode="after")
    def _check(self) -> PolicyConfig:
        if len(self.action_low) != self.action_dim or len(self.action_high) != self.action_dim:
            raise ValueError("action_low and action_high need action_dim entries")
        if any(lo >= hi for lo, hi in zip(self.action_low, self.action_high, strict=True)):
            raise ValueError("action_low must be below action_high")
        if any(h <= 0 for h in self.hidden):
            raise ValueError("hidden sizes must be positive")
        if self.obs_clip is not None and not self.obs_normalization:
            raise ValueError("obs_clip needs obs_normalization")
        if len({o.key for o in self.obs}) != len(self.obs):
            raise ValueError("observation keys repeat")
        if self.action_dim % self.action_chunk:
            raise ValueError(f"action_dim {self.action_dim} is not a whole number of {self.action_chunk}-step chunks")
        return self

    @property
    def obs_dim(self) -> int:
        return sum(o.dim for o in self.obs)

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        shapes: dict[str, tuple[int, ...]] = {}
        fan_in = self.obs_dim
        for i, h in enumerate(self.hidden):
            shapes[f"trunk.{i}.weight"] = (h, fan_in)
            shapes[f"trunk.{i}.bias"] = (h,)
            if self.layer_norm:
                shapes[f"norm.{i}.weight"] = (h,)
                shapes[f"norm.{i}.bias"] = (h,)
            fan_in = h
        shapes["mean.weight"] = (self.action_dim, fan_in)
        shapes["mean.bias"] = (self.action_dim,)
        if self.stochastic:
            shapes["log_std.weight"] = (self.action_dim, fan_in)
            shapes["log_std.bias"] = (self.action_dim,)
        if self.obs_normalization:
            shapes["obs_mean"] = (self.obs_dim,)
            shapes["obs_std"] = (self.obs_dim,)
        return shapes
