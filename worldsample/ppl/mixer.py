"""The PPL data mixer: composes each learner batch from real and synthetic pools.

Real part: demo data plus the steps a human drove (interventions), and online data, split
`demo_share` : rest, as in HIL-SERL/RLPD; demos and interventions share their half in proportion
to their sizes (one buffer, as HIL-SERL appends interventions to the demo buffer). Synthetic part: floor(rho * B) samples, rho from the entropy pacer; a fraction
lambda* from the success pool and the rest from the failure pool; per-sample critic weights
zero out samples that would push the synthetic mean Q away from the real one.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from worldsample.ppl.config import PPLConfig
from worldsample.ppl.schedule import EntropyPacer
from worldsample.ppl.selection import q_aware_lambda, zero_weights_breaking_bound
from worldsample.store.sampler import Batch, GroupSampler, MixtureSampler


class Critic(Protocol):
    """What the mixer needs from the learner (current networks, no gradients)."""

    def q_values(self, batch: Batch) -> np.ndarray: ...

    def entropy(self, batch: Batch) -> float: ...


def concat(pieces: list[tuple[np.ndarray, Batch]]) -> Batch:
    """Stack batches that share keys; `source` labels each row."""
    keys = set.intersection(*(set(b) for _, b in pieces))
    out = {k: np.concatenate([b[k] for _, b in pieces]) for k in keys}
    out["source"] = np.concatenate([src for src, _ in pieces])
    return out


class PPLMixer:
    def __init__(
        self,
        cfg: PPLConfig,
        demo: GroupSampler,
        online: GroupSampler,
        synthetic_pos: GroupSampler | None,
        synthetic_neg: GroupSampler | None,
        critic: Critic | None,
        entropy_min: float,
        interventions: GroupSampler | None = None,
    ):
        if cfg.mode == "ppl" and critic is None:
            raise ValueError("ppl mode needs the critic for Q-aware selection and pacing")
        self.cfg = cfg
        self.demo, self.interventions = demo, interventions
        groups = {"demo": demo, "online": online, **({"intervention": interventions} if interventions is not None else {})}
        self.real = MixtureSampler(groups, {"demo": cfg.demo_share, "online": 1 - cfg.demo_share})
        self.pos, self.neg = synthetic_pos, synthetic_neg
        self.critic = critic
        self.pacer = EntropyPacer(cfg, entropy_min if cfg.entropy_min is None else cfg.entropy_min)
        self.q_real = self.q_pos = self.q_neg = float("nan")
        self.calls = 0
        self.last: dict[str, float] = {}

    def _real_weights(self) -> None:
        """Demos and interventions split the demo share by size; online gets the rest."""
        if self.interventions is None:
            return
        nd, ni = self.demo.num_transitions, self.interventions.num_transitions
        share = self.cfg.demo_share
        self.real.weights.update(demo=share * nd / max(nd + ni, 1), intervention=share * ni / max(nd + ni, 1))

    # -- pool statistics ------------------------------------------------------------------------
    def _pool_ready(self, s: GroupSampler | None) -> bool:
        return s is not None and s.num_transitions > 0

    def _probe(self, rng: np.random.Generator, n: int, gamma: float, actor_learning: bool) -> None:
        """Refresh the pool mean-Q estimates, and the entropy on real states once the actor learns
        (during a critic warm-up the actor is the behaviour-cloned one: its entropy says nothing
        about the critic, and H_0 is the entropy at the start of online *actor* training)."""
        probe = self.real.sample(rng, self.cfg.q_probe, n, gamma)
        self.q_real = float(self.critic.q_values(probe).mean())
        if actor_learning:
            self.pacer.observe(self.critic.entropy(probe))
        for attr, pool in (("q_pos", self.pos), ("q_neg", self.neg)):
            q = float(self.critic.q_values(pool.nstep(rng, self.cfg.q_probe, n, gamma)).mean()) if self._pool_ready(pool) else float("nan")
            setattr(self, attr, q)

    def _estimates_cover_pools(self) -> bool:
        """Every ready pool (and the real data) has a finite mean-Q estimate."""
        needed = [self.q_real] + [q for q, pool in ((self.q_pos, self.pos), (self.q_neg, self.neg)) if self._pool_ready(pool)]
        return bool(np.isfinite(needed).all())

    def _lambda(self) -> float:
        pos, neg = self._pool_ready(self.pos), self._pool_ready(self.neg)
        if pos and not neg:
            return 1.0
        if neg and not pos:
            return 0.0
        return q_aware_lambda(self.q_real, self.q_pos, self.q_neg)

    # -- batches --------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, batch: int, n: int = 1, gamma: float = 0.97, actor_learning: bool = True) -> Batch:
        cfg = self.cfg
        self.calls += 1
        self._real_weights()
        have_syn = self._pool_ready(self.pos) or self._pool_ready(self.neg)
        if cfg.mode == "ppl" and (self.calls == 1 or self.calls % cfg.q_probe_every == 0 or (actor_learning and self.pacer.h0 is None)):
            self._probe(rng, n, gamma, actor_learning)
        rho = self.pacer.rho if have_syn else 0.0
        n_syn = int(np.floor(rho * batch))
        if cfg.mode == "ppl" and n_syn and not self._estimates_cover_pools():
            self._probe(rng, n, gamma, actor_learning)  # a pool filled since the last probe
        lam = self._lambda() if n_syn and cfg.mode == "ppl" else float("nan")
        parts: list[tuple[str, Batch]] = []
        if n_syn:
            if cfg.mode == "naive":
                n_pos = self._naive_split(n_syn)
            else:
                n_pos = int(round(lam * n_syn))
            for name, pool, k in (("synthetic_pos", self.pos, n_pos), ("synthetic_neg", self.neg, n_syn - n_pos)):
                if k:
                    parts.append((name, pool.nstep(rng, k, n, gamma)))
        real = self.real.sample(rng, batch - n_syn, n, gamma)
        pieces = [(real["group"], real)]
        pieces += [(np.full(len(b["action"]), name), b) for name, b in parts]
        out = concat(pieces)
        weights = np.ones(batch, np.float32)
        syn = np.char.startswith(out["source"].astype(str), "synthetic")
        if cfg.mode == "ppl" and syn.any():
            q = self.critic.q_values({k: v[syn] for k, v in out.items()})
            weights[syn] = zero_weights_breaking_bound(q, self.q_real, cfg.delta_q)
        out["weights"] = weights
        self.last = self._metrics(out, rho, lam)
        return out

    def _naive_split(self, n_syn: int) -> int:
        """Naive mode ignores outcome: share by pool size, as uniform sampling of the group would."""
        sizes = [s.num_transitions if self._pool_ready(s) else 0 for s in (self.pos, self.neg)]
        return int(round(n_syn * sizes[0] / max(1, sum(sizes))))

    def _metrics(self, out: Batch, rho: float, lam: float) -> dict[str, float]:
        src = out["source"]
        m = {f"batch/{k}": float((src == k).sum()) for k in ("demo", "intervention", "online", "synthetic_pos", "synthetic_neg")}
        m["batch/synthetic_share"] = float(np.char.startswith(src.astype(str), "synthetic").mean())
        m["batch/zero_weight"] = float((out["weights"] == 0).sum())
        m.update({"ppl/rho": rho, "ppl/lambda": lam, "ppl/entropy": self.pacer.h_ema if self.pacer.h_ema is not None else float("nan"),
                  "ppl/entropy_norm": self.pacer.normalised, "ppl/q_real": self.q_real, "ppl/q_pos": self.q_pos, "ppl/q_neg": self.q_neg})
        return m

    def state(self) -> dict:
        return {"pacer": self.pacer.state(), "calls": self.calls}

    def load_state(self, st: dict) -> None:
        self.pacer.load_state(st["pacer"])
        self.calls = int(st["calls"])


