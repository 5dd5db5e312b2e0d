"""The SAC learner's critic, read from a trainer checkpoint (RUN/trainer/vNNNNNN/learner.*) and run
in numpy: no RLlib, no torch, nothing unpickled. Best-of-N uses it to score a candidate chunk by
the value of where it ends (search.py, `score="value"`).

The checkpoint's `learner` part holds RLlib's LearnerGroup state; the RLModule's weights are under
learner/learner/rl_module/default_policy/ in learner.json, each a reference into
learner.safetensors (worldsample/loop/checkpoint.py). RLlib's continuous SAC critic (ray 2.x
`SACCatalog`, the module `worldsample.learner.sac.SACAgent` builds) is, per critic:

    obs     -> MLP  Linear [LayerNorm] ReLU per layer (`fcnet_hiddens`, the actor's encoder shape)
    actions -> MLP  Linear ReLU per layer
    embeds   = concat(actions, obs)            (RLlib's multi-stream encoder sorts its inputs by name)
    fusion   : h = tanh(L0(embeds)), then h = tanh(Li(concat(h, embeds))); out = tanh(Lout(concat(h, embeds)))
    head     : Linear -> Q

(tanh: RLlib's default `fusionnet_activation`; LayerNorm eps 1e-3 as RLlib's TorchMLP). Critics:
With `learner.critic: mlp` a critic is instead one MLP on concat(obs, actions) and its head.
`qf`, `qf_twin` and, for an ensemble, `qf_extra_encoders.i` / `qf_extra_heads.i` (RLlib's critic) or
the members of the batched MLP `qf_extra.*` (the mlp critic). Q(s, a) is what
the actor is trained against: the minimum of the twin (RLlib's `compute_q_values`), the mean of
an ensemble of more than two (`EnsembleSACTorchRLModule`), the one critic otherwise.
tests/evaluation/test_critic.py checks the numbers against RLlib's module.

The critic's values are in the learner's reward units and discount: `loop.reward` (success: 1 at
the successful step; task: the task's reward times `loop.reward_scale`) and `loop.learner.gamma`,
read from the run's config.yaml.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldsample.errors import ConfigError
from worldsample.paths import RunFiles
from worldsample.versioned import VersionedDir, VersionError

MODULE_PATH = ("learner", "learner", "rl_module", "default_policy")  # in the learner part's JSON tree
LN_EPS = 1e-3

QNet = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (obs (B, D), actions (B, A)) -> (B,)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


class _MLP:
    """RLlib's TorchMLP `<prefix>.net.mlp.<i>` as saved: 2-d weights are Linear layers, 1-d weights
    LayerNorms after them; `act` follows every Linear (and its LayerNorm) when `act_last`, else all
    but the last (a head's output layer is linear)."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, act: Callable[[np.ndarray], np.ndarray] | None,
                 act_last: bool = True):
        pat = re.compile(re.escape(prefix) + r"\.net\.mlp\.(\d+)\.weight$")
        idx = sorted(int(m.group(1)) for k in w if (m := pat.match(k)))
        if not idx:
            raise ConfigError(f"the trainer checkpoint has no layers {prefix}.net.mlp.*")
        layers: list[list] = []  # [linear (W, b), layernorm (g, b) or None]
        for i in idx:
            weight, bias = w[f"{prefix}.net.mlp.{i}.weight"], w.get(f"{prefix}.net.mlp.{i}.bias")
            if weight.ndim == 2:
                layers.append([(weight.astype(np.float32), None if bias is None else bias.astype(np.float32)), None])
            elif layers and layers[-1][1] is None:
                layers[-1][1] = (weight.astype(np.float32), bias.astype(np.float32))
            else:
                raise ConfigError(f"unexpected layer {prefix}.net.mlp.{i} of shape {weight.shape}")
        self._set(layers, act, act_last)

    @classmethod
    def of(cls, layers: list[list], act: Callable[[np.ndarray], np.ndarray] | None, act_last: bool) -> _MLP:
        """An MLP of given layers: [(W (out, in), b), LayerNorm (g, b) or None] each."""
        mlp = cls.__new__(cls)
        mlp._set(layers, act, act_last)
        return mlp

    def _set(self, layers: list[list], act, act_last: bool) -> None:
        self.layers, self.act, self.act_last = layers, act, act_last
        self.in_dim = layers[0][0][0].shape[1]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for j, ((W, b), ln) in enumerate(self.layers):
            x = x @ W.T + (0.0 if b is None else b)
            if ln is not None:
                mu = x.mean(-1, keepdims=True)
                var = ((x - mu) ** 2).mean(-1, keepdims=True)
                x = (x - mu) / np.sqrt(var + LN_EPS) * ln[0] + ln[1]
            if self.act is not None and (self.act_last or j < len(self.layers) - 1):
                x = self.act(x)
        return x


class _MLPQNet:
    """One critic of `learner.critic: mlp` (worldsample/learner/mlp_critic.py): an MLP encoder on
    concat(obs, actions), Linear [LayerNorm] ReLU per layer, then the linear head."""

    def __init__(self, w: Mapping[str, np.ndarray], encoder: str, head: str, action_dim: int):
        self.encoder = _MLP(w, encoder, _relu)
        self.head = _MLP(w, head, _relu, act_last=False)
        self.in_dim = self.encoder.in_dim - action_dim  # the observation's width

    def __call__(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return self.head(self.encoder(np.concatenate([obs, actions], axis=-1)))[..., 0]


class _QNet:
    """One critic: its multi-stream encoder (obs, actions, fusion) and its head."""

    def __init__(self, w: Mapping[str, np.ndarray], encoder: str, head: str):
        self.obs = _MLP(w, f"{encoder}.base_encoders.obs", _relu)
        self.actions = _MLP(w, f"{encoder}.base_encoders.actions", _relu)
        fusion = re.compile(re.escape(encoder) + r"\.fusion_layers\.(\d+)\.weight$")
        n = sorted(int(m.group(1)) for k in w if (m := fusion.match(k)))
        self.fusion = [(w[f"{encoder}.fusion_layers.{i}.weight"], w.get(f"{encoder}.fusion_layers.{i}.bias"))
                       for i in n]
        out_w = w.get(f"{encoder}.output_layer.weight")
        self.out = None if out_w is None else (out_w, w.get(f"{encoder}.output_layer.bias"))
        self.head = _MLP(w, head, _relu, act_last=False)

    @staticmethod
    def _lin(x: np.ndarray, layer) -> np.ndarray:
        W, b = layer
        return x @ W.T.astype(np.float32) + (0.0 if b is None else b.astype(np.float32))

    def __call__(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        embeds = np.concatenate([self.actions(actions), self.obs(obs)], axis=-1)  # sorted: actions, obs
        h = embeds
        for i, layer in enumerate(self.fusion):
            h = np.tanh(self._lin(embeds if i == 0 else np.concatenate([h, embeds], -1), layer))
        if self.out is not None:
            h = np.tanh(self._lin(np.concatenate([h, embeds], -1) if self.fusion else embeds, self.out))
        return self.head(h)[..., 0]


@dataclass
class Critic:
    """Q(s, a) of the learner, on observation dicts (the learner's `obs_keys`, flattened in order)."""

    nets: list[QNet]
    obs_keys: list[str]
    gamma: float = 0.97
    reward: str = "success"  # the learner's reward: success | task | classifier (loop.reward)
    reward_scale: float = 1.0  # reward=task: the learner sees the task's reward times this
    aggregate: str = "min"  # min (twin), mean (ensemble of more than two)
    source: dict = field(default_factory=dict)  # checkpoint version, round, real steps, learner updates

    def __post_init__(self):
        if not self.nets:
            raise ConfigError("a critic needs at least one Q network")
        if self.aggregate not in ("min", "mean"):
            raise ConfigError(f"aggregate must be min or mean, got {self.aggregate!r}")

    def flat(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        missing = [k for k in self.obs_keys if k not in obs]
        if missing:
            raise ConfigError(f"the critic reads {self.obs_keys}; {missing} not in the observations {sorted(obs)}")
        n = len(np.asarray(obs[self.obs_keys[0]]))
        return np.concatenate([np.asarray(obs[k], np.float32).reshape(n, -1) for k in self.obs_keys], axis=1)

    def q_each(self, obs: Mapping[str, np.ndarray], actions: np.ndarray) -> np.ndarray:
        """(critics, B): every critic's Q."""
        x, a = self.flat(obs), np.asarray(actions, np.float32).reshape(len(self.flat(obs)), -1)
        return np.stack([np.asarray(net(x, a), np.float64).reshape(len(x)) for net in self.nets])

    def q(self, obs: Mapping[str, np.ndarray], actions: np.ndarray) -> np.ndarray:
        """(B,): the Q the actor maximises (min of a twin, mean of a larger ensemble)."""
        q = self.q_each(obs, actions)
        return q.min(0) if self.aggregate == "min" else q.mean(0)


class _BatchedMember:
    """Member i of the batched MLP critics (worldsample/learner/mlp_critic.py `BatchedMLP`, saved as
    `qf_extra.weights.j` (k, in, out), `qf_extra.biases.j` (k, 1, out) and, with LayerNorm,
    `qf_extra.norm_weights.j` / `qf_extra.norm_biases.j`): the layers of an `_MLP` on concat(obs, actions),
    its last layer linear."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, i: int, action_dim: int):
        n = len({k for k in w if k.startswith(f"{prefix}.weights.")})
        norm = [(w[f"{prefix}.norm_weights.{j}"][i, 0], w[f"{prefix}.norm_biases.{j}"][i, 0])
                if f"{prefix}.norm_weights.{j}" in w else None for j in range(n)]
        layers = [[(w[f"{prefix}.weights.{j}"][i].T.astype(np.float32), w[f"{prefix}.biases.{j}"][i, 0]), norm[j]]
                  for j in range(n)]
        self.mlp = _MLP.of(layers, _relu, act_last=False)
        self.in_dim = self.mlp.in_dim - action_dim

    def __call__(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return self.mlp(np.concatenate([obs, actions], axis=-1))[..., 0]


def _batched(w: Mapping[str, np.ndarray], prefix: str = "qf_extra") -> list[QNet]:
    first = w.get(f"{prefix}.weights.0")
    if first is None:
        return []
    action_dim = _action_dim_from(w, int(first.shape[1]))
    return [_BatchedMember(w, prefix, i, action_dim) for i in range(int(first.shape[0]))]


def _qnet(w: Mapping[str, np.ndarray], encoder: str, head: str):
    """RLlib's multi-stream critic, or the MLP critic (its encoder reads [obs, action] directly)."""
    if f"{encoder}.net.mlp.0.weight" in w:
        return _MLPQNet(w, encoder, head, action_dim=_action_dim(w, encoder))
    return _QNet(w, encoder, head)


def _action_dim(w: Mapping[str, np.ndarray], encoder: str) -> int:
    return _action_dim_from(w, int(w[f"{encoder}.net.mlp.0.weight"].shape[1]))


def _action_dim_from(w: Mapping[str, np.ndarray], critic_in: int) -> int:
    """The critic reads [obs, action] (`critic_in` wide); the actor's first layer the observation alone."""
    first = w.get("pi_encoder.net.mlp.0.weight")
    if first is None:
        raise ConfigError("the trainer checkpoint has no actor layer pi_encoder.net.mlp.0 (the observation's width)")
    return critic_in - int(first.shape[1])


def critic_from_tensors(w: Mapping[str, np.ndarray], obs_keys: list[str], **kw) -> Critic:
    """A Critic from the RLModule's state dict (names as RLlib saves them)."""
    nets: list[QNet] = [_qnet(w, "qf_encoder", "qf")]
    if any(k.startswith("qf_twin_encoder.") for k in w):
        nets.append(_qnet(w, "qf_twin_encoder", "qf_twin"))
    extra = sorted({int(m.group(1)) for k in w if (m := re.match(r"qf_extra_encoders\.(\d+)\.", k))})
    nets += [_qnet(w, f"qf_extra_encoders.{i}", f"qf_extra_heads.{i}") for i in extra]
    nets += _batched(w)
    obs_dim = nets[0].in_dim if isinstance(nets[0], _MLPQNet) else nets[0].obs.in_dim
    return Critic(nets=nets, obs_keys=list(obs_keys), aggregate="mean" if len(nets) > 2 else "min",
                  source={"obs_dim": obs_dim, "critics": len(nets), **kw.pop("source", {})}, **kw)


def load_critic(run_dir: str | Path, version: int | None = None) -> Critic:
    """The critic of the run's latest (or a given) trainer checkpoint, with the learner's reward and
    discount from the run's config. A run without one gets a ConfigError that says so."""
    from safetensors import SafetensorError, safe_open

    from worldsample.config import RunConfig, saved_config

    root = RunFiles.of(run_dir).trainer
    vdir = VersionedDir(root)
    try:
        latest = vdir.latest() if root.exists() else None
    except VersionError as e:
        raise ConfigError(f"the trainer checkpoints in {root} are unreadable: {e}") from None
    if latest is None:
        raise ConfigError(f"{run_dir} has no trainer checkpoint in {root}: scoring by the critic's value needs the "
                          "learner's critic, which `worldsample train` saves there; use --score success")
    v = latest if version is None else version
    path = vdir.path(v)
    try:
        tree = json.loads((path / "learner.json").read_text())
        meta = json.loads((path / "meta.json").read_text()) if (path / "meta.json").exists() else {}
        node = tree
        for part in MODULE_PATH:
            node = node[part]
        refs = {name: ref["__array__"] for name, ref in node.items()
                if isinstance(ref, dict) and "__array__" in ref and name.startswith(("qf", "pi_encoder.net.mlp.0."))}
        with safe_open(str(path / "learner.safetensors"), framework="numpy") as f:
            w = {name: f.get_tensor(key) for name, key in refs.items()}
    except FileNotFoundError as e:
        raise ConfigError(f"trainer checkpoint {path} has no learner part ({e.filename})") from None
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as e:
        raise ConfigError(f"trainer checkpoint {path}: no SAC critic in its learner part ({e!r})") from None
    cfg = saved_config(run_dir) or RunConfig()
    loop = cfg.loop
    source = {"checkpoint": v, "path": str(path), "round": meta.get("round"), "real_steps": meta.get("real_steps"),
              "updates": tree.get("updates")}
    return critic_from_tensors(w, loop.learner.obs_keys, gamma=loop.learner.gamma, reward=loop.reward,
                               reward_scale=loop.reward_scale if loop.reward == "task" else 1.0, source=source)
