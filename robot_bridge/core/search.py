"""Best-of-N search at each control tick, without torch: N candidate action chunks imagined H steps
ahead in the run's world model (its ONNX export, worldsample/world_model/onnx_model.py), closed
loop with the policy, and the first action of the best one executed.

Candidate 0 is the base policy (its deterministic action at every imagined step); candidates
1..N-1 sample the policy's own tanh-squashed Gaussian at every imagined step, or, with `spread`,
add N(0, spread^2) to its deterministic action (a deterministic policy). Each candidate follows its
first imagined future and is replayed on `samples - 1` more when the model is stochastic. The
scoring rule is the offline search's (worldsample/evaluation/scoring.py): discounted imagined
success, then predicted return, ties to the base policy. The imagination itself is
worldsample/evaluation/imagined.py's `ClosedLoop` step for step (episode-start padding, residual
decoding of vectors, an imagined row ends at a success or done label); a test checks that the
two choose the same actions.

Time budget (`budget_s`, per control tick): the base action is computed first; before the encode
and before each imagined step the search checks that the time spent so far plus that phase's
estimated time fits in the budget, and when it does not it stops and the base action is executed,
counted as a fallback. The estimate is `margin` (1.5) times the 90th percentile of the phase's last
32 measured times (the offline search takes the maximum): on a shared robot PC one step stalled by
the scheduler must not turn the search off until the next episode. Whatever the estimate,
a step starts only while the tick is within its budget, so a tick ends over the budget by at most
that one step's time (and the scoring after it); such ticks are counted as overruns. Timings come
from `warm_up` (untimed decisions at each episode start, while the arm resets) and from every step
since.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from robot_bridge.errors import BridgeError
from worldsample.evaluation.scoring import GAMMA, best_candidate, success_keys
from worldsample.policy import NumpyActor
from worldsample.world_model.onnx_model import OnnxWorldModel


class SearchError(BridgeError):
    """The search cannot run: no usable world model, or a policy it cannot imagine with."""


@dataclass
class SearchCounts:
    decisions: int = 0
    searched: int = 0  # ticks that imagined every candidate and executed the best one
    fallbacks: int = 0  # ticks stopped by the time budget: the base policy's action was executed
    overruns: int = 0  # ticks that ended over the budget all the same
    chose_base: int = 0  # searched ticks whose best candidate was the base policy's
    max_decision_ms: float = 0.0
    total_decision_ms: float = 0.0

    def add(self, other: SearchCounts) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, max(getattr(self, k), v) if k == "max_decision_ms" else getattr(self, k) + v)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mean_decision_ms"] = round(self.total_decision_ms / self.decisions, 3) if self.decisions else None
        d["max_decision_ms"] = round(self.max_decision_ms, 3)
        d["total_decision_ms"] = round(self.total_decision_ms, 3)
        return d


def check_fit(actor, wm: OnnxWorldModel) -> None:
    """The policy must be a numpy MLP reading only vectors the world model predicts, with their sizes."""
    if not isinstance(actor, NumpyActor):
        raise SearchError(f"policy v{actor.version} is a pixel policy; the search imagines vector observations only "
                          "(a numpy MLP policy over the world model's vector keys)")
    for o in actor.config.obs:
        if wm.vector_keys.get(o.key) != o.dim:
            raise SearchError(f"policy v{actor.version} reads {o.key} of size {o.dim}; world model v{wm.version} "
                              f"predicts {wm.vector_keys}: train the world model on the policy's observation keys")
    if actor.config.action_dim != wm.action_dim:
        raise SearchError(f"policy v{actor.version} outputs {actor.config.action_dim} actions, world model "
                          f"v{wm.version} takes {wm.action_dim}")


class Searcher:
    def __init__(self, wm: OnnxWorldModel, actor: NumpyActor, n: int, horizon: int, samples: int | None = None,
                 budget_s: float | None = None, seed: int = 0, spread: float | None = None, margin: float = 1.5,
                 domain: int = 0, gamma: float = GAMMA, clock: Callable[[], float] = time.perf_counter):
        if n < 1 or horizon < 1:
            raise SearchError(f"Best-of-N needs n >= 1 and horizon >= 1, got n={n}, horizon={horizon}")
        if budget_s is not None and budget_s <= 0:
            raise SearchError(f"the time budget must be positive, got {budget_s}")
        check_fit(actor, wm)
        if n > 1 and spread is None and not actor.config.stochastic:
            raise SearchError(f"policy v{actor.version} is deterministic: set episode.search.spread to sample "
                              "candidates around its action")
        self.wm, self.actor, self.n, self.horizon = wm, actor, n, horizon
        self.samples = samples or (4 if wm.stochastic else 1)
        self.budget_s, self.seed, self.spread, self.margin, self.gamma = budget_s, seed, spread, margin, gamma
        self.domain, self.clock = domain, clock
        self.K, self.A = wm.history, wm.action_dim
        self.rows = self.n * self.samples
        self._keys = [o.key for o in actor.config.obs]
        self._low = np.asarray(actor.config.action_low, np.float32)
        self._high = np.asarray(actor.config.action_high, np.float32)
        self.rng = np.random.default_rng(seed)
        self.counts = SearchCounts()
        self._times: dict[str, deque[float]] = {"encode": deque(maxlen=32), "step": deque(maxlen=32)}
        self._lat: deque[np.ndarray] = deque(maxlen=self.K)  # latents of the episode's last K observations
        self._acts: deque[np.ndarray] = deque(maxlen=max(self.K - 1, 0))
        self._calls = 0
        self._now: tuple[int, np.ndarray, np.ndarray | None] | None = None  # (id(obs), latent, decoded vector)

    # -- episode -------------------------------------------------------------------------------------

    def reset(self) -> None:
        """A new episode: no history."""
        self._lat.clear()
        self._acts.clear()
        self._now = None

    def warm_up(self, obs: Mapping[str, np.ndarray], decisions: int = 3) -> None:
        """Untimed, uncounted decisions from `obs` that measure the encode and the imagined step afresh
        (the first one, onnxruntime's slowest, is not kept), with their own random numbers."""
        rng, calls, lat, acts = self.rng, self._calls, list(self._lat), list(self._acts)
        self.rng = np.random.default_rng(2**32 + self.seed)
        for i in range(decisions):
            if i == 1:
                for d in self._times.values():
                    d.clear()
            self.reset()
            self._decide(obs, None)
        self.rng, self._calls = rng, calls
        self.reset()
        self._lat.extend(lat)
        self._acts.extend(acts)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The action for the newest observation (whose context is what `record` was given)."""
        t0 = self.clock()
        action, searched, best = self._decide(obs, t0 if self.budget_s is not None else None)
        ms = (self.clock() - t0) * 1e3
        c = self.counts
        c.decisions += 1
        c.searched += searched
        c.fallbacks += not searched
        c.chose_base += searched and best == 0
        c.overruns += self.budget_s is not None and ms > self.budget_s * 1e3
        c.max_decision_ms = max(c.max_decision_ms, ms)
        c.total_decision_ms += ms
        return action

    def record(self, obs: Mapping[str, np.ndarray], action: np.ndarray) -> None:
        """The step that happened: the observation and the action sent (the policy's, limited, or a human's)."""
        if self._now is not None and self._now[0] == id(obs):
            z = self._now[1]
        else:
            z = self.wm.encode(self._one(obs))[0][0]
        self._lat.append(z)
        if self.K > 1:
            self._acts.append(np.asarray(action, np.float32).reshape(self.A))
        self._now = None

    # -- one decision ----------------------------------------------------------------------------------

    def _one(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: np.asarray(obs[k])[None] for k in self.wm.keys}

    def estimate_s(self, phase: str = "step") -> float:
        """What the budget check expects `phase` to take: margin x the 90th percentile of recent times."""
        times = sorted(self._times[phase])
        return times[int(0.9 * (len(times) - 1))] * self.margin if times else 0.0

    def _fits(self, phase: str, t0: float | None) -> bool:
        return t0 is None or (self.clock() - t0) + self.estimate_s(phase) <= self.budget_s

    def _timed(self, phase: str, fn):
        start = self.clock()
        out = fn()
        self._times[phase].append(self.clock() - start)
        return out

    def _candidates(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        S, out = self.samples, np.empty((self.rows, self.A), np.float32)
        for c in range(self.n):
            lead = {k: obs[k][c * S] for k in self._keys}  # the candidate follows its first imagined future
            if c == 0:
                a = self.actor.act(lead)
            elif self.spread is not None:
                a = np.clip(self.actor.act(lead) + self.rng.normal(0.0, self.spread, self.A), self._low, self._high)
            else:
                a = self.actor.act(lead, explore=True, rng=self.rng)
            out[c * S : (c + 1) * S] = a
        return out

    def _decide(self, obs: Mapping[str, np.ndarray], t0: float | None) -> tuple[np.ndarray, bool, int]:
        base = self.actor.act(obs)
        if not self._fits("encode", t0):
            return base, False, -1
        z, ref = self._timed("encode", lambda: self.wm.encode(self._one(obs)))
        self._now = (id(obs), z[0], ref)
        wm, B, K = self.wm, self.rows, self.K
        lat = [*self._lat, z[0]][-K:]
        acts = list(self._acts)[len(self._acts) - (len(lat) - 1):] if len(lat) > 1 else []
        pad = K - len(lat)  # an episode start: the first frame repeated with zero actions
        hist = np.repeat(np.stack([lat[0]] * pad + lat)[None], B, axis=0)
        past = np.zeros((B, K - 1, self.A), np.float32)
        if acts:
            past[:, K - 1 - len(acts):] = np.stack(acts)[None]
        last_real = {k: np.repeat(np.asarray(obs[k], np.float32).reshape(1, -1), B, axis=0) for k in wm.vector_keys}
        cur = {k: v.copy() for k, v in last_real.items()}
        dom = np.full(B, self.domain, np.int64)
        self._calls += 1
        noise_rng = np.random.default_rng([self.seed, self._calls])
        alive = np.ones(B, bool)
        success, length, returns = np.zeros(B, bool), np.zeros(B, np.int64), np.zeros(B, np.float64)
        first = None
        for _ in range(self.horizon):
            if not self._fits("step", t0):
                return base, False, -1
            start = self.clock()
            a = self._candidates(cur)
            first = a if first is None else first
            full = np.concatenate([past, a[:, None]], axis=1)
            cn = noise_rng.standard_normal(hist.shape, np.float32) if wm.context_noise else None
            gn = noise_rng.standard_normal((B, wm.noise_draws, *wm.latent_shape), np.float32) if wm.noise_draws \
                else None
            out = wm.step(hist, full, dom, cn, gn)
            hist, past = np.concatenate([hist[:, 1:], out["next"][:, None]], axis=1), full[:, 1:]
            r, sp, dp = out["reward"].reshape(B), out["success"].reshape(B), out["done"].reshape(B)
            returns += np.where(alive, r, 0.0)
            length += alive
            won = alive & (sp > wm.success_threshold)
            success |= won
            alive &= ~(won | (dp > wm.done_threshold))
            if alive.any():
                i = 0
                for k, d in wm.vector_keys.items():
                    dec = out["vector"][:, i : i + d]
                    cur[k] = (last_real[k] + (dec - ref[:, i : i + d])) if wm.residual else dec.copy()
                    i += d
            self._times["step"].append(self.clock() - start)
            if not alive.any():
                break
        best = best_candidate(success_keys(success, length, returns, self.n, self.samples, self.gamma))
        return (base if best == 0 else first[best * self.samples].copy()), True, best
