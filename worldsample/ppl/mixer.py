"""Data mixers: each composes a learner batch from the real pools and, in some, synthetic ones.

Picked once from `ppl.mode` by `make_mixer` (the only place that reads the mode string):

    off    RealDataMixer  real data only (RLPD / HIL-SERL)
    naive  NaiveMixer     a fixed synthetic share, split between the pools by their sizes
    ppl    PPLMixer       Policy-Paced Learning: share paced by the actor's entropy, Q-aware
                          choice between the success and failure pools, per-sample critic weights

Real part (all mixers): demo data plus the steps a human drove (interventions), and online data,
split `demo_share` : rest, as in HIL-SERL/RLPD; demos and interventions share their half in
proportion to their sizes (one buffer, as HIL-SERL appends interventions to the demo buffer).
With `loop.imitate_successes`, the online episodes the policy won without a human (`successes`)
join that half the same way (AW-Opt's positive filtering); the learner imitates all three.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from worldsample.ppl.config import PPLConfig
from worldsample.ppl.schedule import EntropyPacer, squashed_entropy_max
from worldsample.ppl.selection import q_aware_lambda, zero_weights_breaking_bound
from worldsample.store.sampler import Batch, GroupSampler, MixtureSampler

_SOURCES = ("demo", "intervention", "success", "online", "synthetic_pos", "synthetic_neg")


class Critic(Protocol):
    """What the PPL mixer needs from the learner (current networks, no gradients)."""

    def q_values(self, batch: Batch) -> np.ndarray: ...

    def entropy(self, batch: Batch) -> float: ...


def concat(pieces: list[tuple[np.ndarray, Batch]]) -> Batch:
    """Stack batches that share keys; `source` labels each row."""
    keys = set.intersection(*(set(b) for _, b in pieces))
    out = {k: np.concatenate([b[k] for _, b in pieces]) for k in keys}
    out["source"] = np.concatenate([src for src, _ in pieces])
    return out


def _ready(pool: GroupSampler | None) -> bool:
    return pool is not None and pool.num_transitions > 0


class RealDataMixer:
    """Real data only. The base of the other mixers: they add a synthetic part to each batch."""

    uses_synthetic = False

    def __init__(self, cfg: PPLConfig, demo: GroupSampler, online: GroupSampler,
                 interventions: GroupSampler | None = None, successes: GroupSampler | None = None):
        self.cfg = cfg
        self.demo = demo
        # the pools that share the demo half by size: demos, the human's steps, the policy's own wins
        self.imitated = {k: v for k, v in (("intervention", interventions), ("success", successes)) if v is not None}
        groups = {"demo": demo, "online": online, **self.imitated}
        self.real = MixtureSampler(groups, {"demo": cfg.demo_share, "online": 1 - cfg.demo_share})
        self.pos: GroupSampler | None = None
        self.neg: GroupSampler | None = None
        self.calls = 0
        self.last: dict[str, float] = {}

    def attach_synthetic(self, pos: GroupSampler, neg: GroupSampler) -> None:
        """The success and failure pools, once the synthetic group exists (ignored without synthetic data)."""

    @property
    def has_synthetic_pools(self) -> bool:
        return self.pos is not None

    def sample(self, rng: np.random.Generator, batch: int, n: int = 1, gamma: float = 0.97,
               actor_learning: bool = True) -> Batch:
        """One batch of `batch` rows (`ppl.placement: add`: `batch` real rows and the synthetic ones on
        top): n-step transitions with `source` and per-row critic `weights`."""
        self.calls += 1
        self._real_weights()
        rho = self._synthetic_share(rng, n, gamma, actor_learning)
        n_syn = int(np.floor(rho * batch))
        parts: list[tuple[str, Batch]] = []
        if n_syn:
            n_pos = self._positives(n_syn, rng, n, gamma, actor_learning)
            for name, pool, k in (("synthetic_pos", self.pos, n_pos), ("synthetic_neg", self.neg, n_syn - n_pos)):
                if k:
                    parts.append((name, pool.nstep(rng, k, n, gamma)))
        real = self.real.sample(rng, batch if self.cfg.placement == "add" else batch - n_syn, n, gamma)
        out = concat([(real["group"], real)] + [(np.full(len(b["action"]), name), b) for name, b in parts])
        syn = np.char.startswith(out["source"].astype(str), "synthetic")
        out["weights"] = self._weights(out, syn)
        self.last = self._metrics(out, syn, rho)
        return out

    # -- what the subclasses change -------------------------------------------------------------
    def _synthetic_share(self, rng: np.random.Generator, n: int, gamma: float, actor_learning: bool) -> float:
        return 0.0

    def _positives(self, n_syn: int, rng: np.random.Generator, n: int, gamma: float, actor_learning: bool) -> int:
        """How many of the n_syn synthetic rows come from the success pool."""
        sizes = [s.num_transitions if _ready(s) else 0 for s in (self.pos, self.neg)]
        return int(round(n_syn * sizes[0] / max(1, sum(sizes))))

    def _weights(self, out: Batch, syn: np.ndarray) -> np.ndarray:
        return np.ones(len(out["source"]), np.float32)

    def _extra_metrics(self) -> dict[str, float]:
        return {}

    # -- shared ---------------------------------------------------------------------------------
    def _real_weights(self) -> None:
        """Demos, interventions and the policy's wins split the demo share by size; online gets the rest."""
        if not self.imitated:
            return
        sizes = {"demo": self.demo.num_transitions, **{k: s.num_transitions for k, s in self.imitated.items()}}
        total = max(sum(sizes.values()), 1)
        self.real.weights.update({k: self.cfg.demo_share * n / total for k, n in sizes.items()})

    def _have_synthetic(self) -> bool:
        return _ready(self.pos) or _ready(self.neg)

    def _metrics(self, out: Batch, syn: np.ndarray, rho: float) -> dict[str, float]:
        src = out["source"]
        m = {f"batch/{k}": float((src == k).sum()) for k in _SOURCES}
        m["batch/synthetic_share"] = float(syn.mean())
        m["batch/zero_weight"] = float((out["weights"] == 0).sum())
        m["ppl/rho"] = rho
        m.update(self._extra_metrics())
        return m

    def state(self) -> dict:
        return {"calls": self.calls}

    def load_state(self, st: dict) -> None:
        self.calls = int(st["calls"])


class NaiveMixer(RealDataMixer):
    """A fixed synthetic share (`naive_share`) whatever the policy's state; pools by their sizes."""

    uses_synthetic = True

    def attach_synthetic(self, pos: GroupSampler, neg: GroupSampler) -> None:
        self.pos, self.neg = pos, neg

    def _synthetic_share(self, rng, n, gamma, actor_learning) -> float:
        return self.cfg.naive_share if self._have_synthetic() else 0.0


class PPLMixer(NaiveMixer):
    """Synthetic share rho from the entropy pacer; a fraction lambda* from the success pool and the
    rest from the failure pool; per-sample critic weights zero out samples that would push the
    synthetic mean Q away from the real one."""

    def __init__(self, cfg: PPLConfig, demo: GroupSampler, online: GroupSampler, critic: Critic,
                 entropy_min: float | None, entropy_max: float | None, interventions: GroupSampler | None = None,
                 successes: GroupSampler | None = None):
        """`entropy_min` and `entropy_max` are the pacing bounds' defaults (the learner's target entropy,
        the action space's maximum); `ppl.entropy_min` and `ppl.entropy_max` override them."""
        if critic is None:
            raise ValueError("ppl mode needs the critic for Q-aware selection and pacing")
        lo = entropy_min if cfg.entropy_min is None else cfg.entropy_min
        hi = entropy_max if cfg.entropy_max is None else cfg.entropy_max
        if lo is None:
            raise ValueError("ppl mode needs entropy_min (the learner's target entropy) or ppl.entropy_min")
        if hi is None:
            raise ValueError("ppl mode needs the action dimension (for the entropy bound |A| ln 2) or ppl.entropy_max")
        super().__init__(cfg, demo, online, interventions, successes)
        self.critic = critic
        self.pacer = EntropyPacer(cfg, lo, hi)
        self.q_real = self.q_pos = self.q_neg = float("nan")
        self.lam = float("nan")

    def attach_synthetic(self, pos: GroupSampler, neg: GroupSampler) -> None:
        super().attach_synthetic(pos, neg)
        self.q_real = self.q_pos = self.q_neg = float("nan")  # estimates are per pool set: probe afresh

    def _probe(self, rng: np.random.Generator, n: int, gamma: float, actor_learning: bool) -> None:
        """Refresh the pool mean-Q estimates, and the entropy on real states once the actor learns
        (during a critic warm-up the actor is the behaviour-cloned one: its entropy says nothing
        about the critic, and H_0 is the entropy at the start of online *actor* training)."""
        probe = self.real.sample(rng, self.cfg.q_probe, n, gamma)
        self.q_real = float(self.critic.q_values(probe).mean())
        if actor_learning:
            self.pacer.observe(self.critic.entropy(probe))
        for attr, pool in (("q_pos", self.pos), ("q_neg", self.neg)):
            if _ready(pool):
                q = float(self.critic.q_values(pool.nstep(rng, self.cfg.q_probe, n, gamma)).mean())
            else:
                q = float("nan")
            setattr(self, attr, q)

    def _estimates_cover_pools(self) -> bool:
        """Every ready pool (and the real data) has a finite mean-Q estimate."""
        needed = [self.q_real] + [q for q, pool in ((self.q_pos, self.pos), (self.q_neg, self.neg)) if _ready(pool)]
        return bool(np.isfinite(needed).all())

    def _synthetic_share(self, rng, n, gamma, actor_learning) -> float:
        if self.calls == 1 or self.calls % self.cfg.q_probe_every == 0 or (actor_learning and self.pacer.h0 is None):
            self._probe(rng, n, gamma, actor_learning)
        rho = self.pacer.rho if self._have_synthetic() else 0.0
        self.lam = float("nan")
        return rho

    def _positives(self, n_syn, rng, n, gamma, actor_learning) -> int:
        if not self._estimates_cover_pools():
            self._probe(rng, n, gamma, actor_learning)  # a pool filled since the last probe
        self.lam = self._lambda()
        return int(round(self.lam * n_syn))

    def _lambda(self) -> float:
        pos, neg = _ready(self.pos), _ready(self.neg)
        if pos and not neg:
            return 1.0
        if neg and not pos:
            return 0.0
        return q_aware_lambda(self.q_real, self.q_pos, self.q_neg)

    def _weights(self, out: Batch, syn: np.ndarray) -> np.ndarray:
        weights = super()._weights(out, syn)
        if syn.any():
            q = self.critic.q_values({k: v[syn] for k, v in out.items()})
            weights[syn] = zero_weights_breaking_bound(q, self.q_real, self.cfg.delta_q)
        return weights

    def _extra_metrics(self) -> dict[str, float]:
        p = self.pacer
        return {
            "ppl/lambda": self.lam,
            "ppl/entropy": p.h_ema if p.h_ema is not None else float("nan"),
            "ppl/entropy_norm": p.normalised,
            "ppl/entropy_h0": p.h0 if p.h0 is not None else float("nan"),
            "ppl/q_real": self.q_real,
            "ppl/q_pos": self.q_pos,
            "ppl/q_neg": self.q_neg,
        }

    def state(self) -> dict:
        return {**super().state(), "pacer": self.pacer.state()}

    def load_state(self, st: dict) -> None:
        super().load_state(st)
        if st.get("pacer"):
            self.pacer.load_state(st["pacer"])


_MIXERS: dict[str, type[RealDataMixer]] = {"off": RealDataMixer, "naive": NaiveMixer, "ppl": PPLMixer}


def mixer_class(cfg: PPLConfig) -> type[RealDataMixer]:
    """The mixer `cfg.mode` names; ask it (e.g. `.uses_synthetic`) instead of comparing the mode."""
    return _MIXERS[cfg.mode]


def make_mixer(cfg: PPLConfig, demo: GroupSampler, online: GroupSampler, interventions: GroupSampler | None = None,
               critic: Critic | None = None, entropy_min: float | None = None,
               action_dim: int | None = None, successes: GroupSampler | None = None) -> RealDataMixer:
    """The mixer `cfg.mode` names. ppl mode paces on the actor's entropy between `entropy_min` (the
    learner's target entropy) and |A| ln 2 for `action_dim`, unless `ppl.entropy_min|max` set them."""
    cls = mixer_class(cfg)
    if cls is PPLMixer:
        entropy_max = squashed_entropy_max(action_dim) if action_dim is not None else None
        return PPLMixer(cfg, demo, online, critic, entropy_min, entropy_max, interventions=interventions,
                        successes=successes)
    return cls(cfg, demo, online, interventions, successes)
