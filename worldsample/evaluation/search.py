"""Best-of-N search in the world model: at each decision, N candidate action chunks of `horizon`
steps are imagined from the real history, scored by the world model's heads, and the first action
of the best chunk is executed (then the search runs again on the next real observation).

Candidates: chunk 0 is the base policy itself (its deterministic action at every imagined step);
chunks 1..N-1 sample the stochastic policy at every imagined step (its tanh-squashed Gaussian), or,
with `spread`, add N(0, spread^2) to the deterministic action (a deterministic policy). Each chunk is
produced closed loop on its first imagined future and, when the model is stochastic, replayed on
`samples - 1` more. Score: the mean discounted imagined success (gamma^(t-1) for a success label at
imagined step t, 0 without one: sooner is better, and a longer chunk must not win by piling up
reward before it succeeds), then the mean predicted return; ties go to the lower index, so to the
base policy. With N = 1 the only
candidate is the base policy, and the executed actions are the base policy's.

Time budget: with `budget_s`, before every imagined step the search checks that the time spent on
this decision plus the slowest recent imagined step (times `margin`) stays within the budget; when
it would not, the decision stops and the base policy's action (computed first) is executed, and
the decision is counted as a fallback. The estimate comes from a warm-up decision at `reset` and
from every step since; a decision that still ends over the budget (a step slower than any seen) is
counted as an overrun, never hidden.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from worldsample.errors import ConfigError
from worldsample.evaluation.imagined import ClosedLoop, check_fit, is_stochastic
from worldsample.policy import NumpyActor


@dataclass
class SearchStats:
    decisions: int = 0
    searched: int = 0  # decisions that imagined every candidate to the end and executed the best
    fallbacks: int = 0  # decisions stopped by the time budget: the base policy's action was executed
    overruns: int = 0  # decisions that ended over the budget all the same
    chose_base: int = 0  # searched decisions whose best candidate was the base policy's chunk
    max_decision_s: float = 0.0
    total_decision_s: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mean_decision_s"] = self.total_decision_s / self.decisions if self.decisions else None
        return d


class BestOfN:
    def __init__(
        self,
        model,
        actor: NumpyActor,
        n: int,
        horizon: int,
        samples: int | None = None,
        budget_s: float | None = None,
        seed: int = 0,
        spread: float | None = None,
        margin: float = 1.5,
        gamma: float = 0.97,
        domain: int = 0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        if n < 1 or horizon < 1:
            raise ConfigError(f"Best-of-N needs n >= 1 and horizon >= 1, got n={n}, horizon={horizon}")
        if budget_s is not None and budget_s <= 0:
            raise ConfigError(f"the time budget must be positive, got {budget_s}")
        if spread is not None and spread <= 0:
            raise ConfigError(f"spread must be positive, got {spread}")
        if n > 1 and spread is None and not actor.config.stochastic:
            raise ConfigError(
                f"policy v{actor.version} is deterministic: give a spread to sample candidates around its action"
            )
        check_fit(actor, model.cfg)
        self.model, self.actor, self.n, self.horizon = model, actor, n, horizon
        self.samples = samples if samples is not None else (4 if is_stochastic(model) else 1)
        self.budget_s, self.margin, self.spread, self.clock, self.seed = budget_s, margin, spread, clock, seed
        self.gamma = gamma
        self.loop = ClosedLoop(model, domain)
        self.keys = self.loop.keys
        self.K = model.cfg.dynamics.history
        self.low = np.asarray(actor.config.action_low, np.float32)
        self.high = np.asarray(actor.config.action_high, np.float32)
        self.rng = np.random.default_rng(seed)
        self.stats = SearchStats()
        self._step_s: deque[float] = deque(maxlen=64)
        self._obs: deque[dict] = deque(maxlen=self.K)
        self._acts: deque[np.ndarray] = deque(maxlen=max(self.K - 1, 0))
        self._calls = 0

    # -- episode ---------------------------------------------------------------------------------

    def reset(self, obs: dict[str, np.ndarray]) -> None:
        """A new episode starts at `obs`. With a budget and no timing yet, one untimed warm-up
        decision measures the imagined step (between episodes, not counted)."""
        self._obs.clear()
        self._acts.clear()
        if self.budget_s is not None and not self._step_s:
            self._obs.append(obs)
            self._decide(budgeted=False, warmup=True)
            self._obs.clear()

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        t0 = self.clock()
        self._obs.append(obs)
        action, completed = self._decide(budgeted=self.budget_s is not None, t0=t0)
        elapsed = self.clock() - t0
        s = self.stats
        s.decisions += 1
        s.searched += completed
        s.fallbacks += not completed
        s.overruns += self.budget_s is not None and elapsed > self.budget_s
        s.max_decision_s = max(s.max_decision_s, elapsed)
        s.total_decision_s += elapsed
        if self.K > 1:
            self._acts.append(action)
        return action

    # -- one decision ------------------------------------------------------------------------------

    def _candidate_policy(self):
        n, S, actor = self.n, self.samples, self.actor
        keys = [o.key for o in actor.config.obs]

        def policy(obs: dict[str, np.ndarray], t: int) -> np.ndarray:
            out = np.empty((n * S, actor.config.action_dim), np.float32)
            for c in range(n):
                lead = {k: obs[k][c * S] for k in keys}  # the chunk follows its first imagined future
                if c == 0:
                    a = actor.act(lead)
                elif self.spread is not None:
                    a = actor.act(lead) + self.rng.normal(0.0, self.spread, self.low.shape)
                    a = np.clip(a, self.low, self.high)
                else:
                    a = actor.act(lead, explore=True, rng=self.rng)
                out[c * S : (c + 1) * S] = a
            return out

        return policy

    def _decide(self, budgeted: bool, t0: float | None = None, warmup: bool = False) -> tuple[np.ndarray, bool]:
        obs = self._obs[-1]
        base = self.actor.act(obs)
        rows = self.n * self.samples
        k = len(self._obs)
        ctx = {key: np.repeat(np.stack([o[key] for o in self._obs])[None], rows, axis=0) for key in self.keys}
        ctx_act = np.repeat(np.stack(list(self._acts)[-(k - 1):])[None], rows, axis=0) if k > 1 else None
        last = [self.clock() if t0 is None else t0]

        def before_step(t: int) -> bool:
            now = self.clock()
            if t > 0:
                self._step_s.append(now - last[0])
            last[0] = now
            if not budgeted:
                return True
            estimate = max(self._step_s, default=0.0) * self.margin
            return (now - t0) + estimate <= self.budget_s

        self._calls += 1
        res = self.loop.run(ctx, self._candidate_policy(), self.horizon, seed=self.seed * 1_000_003 + self._calls,
                            context_actions=ctx_act, before_step=before_step)
        if res.completed and len(res.length):
            self._step_s.append(self.clock() - last[0])
        if not res.completed:
            return base, False
        S = self.samples
        success = (res.success * self.gamma ** (res.length - 1.0)).reshape(self.n, S).mean(axis=1)
        returns = res.returns.reshape(self.n, S).mean(axis=1)
        best = max(range(self.n), key=lambda c: (success[c], returns[c], -c))
        if not warmup:
            self.stats.chose_base += best == 0
        return res.actions[best * S, 0].astype(np.float32), True


def run_search(
    model,
    actor: NumpyActor,
    env_cfg,
    seeds: list[int],
    n: int,
    horizon: int,
    samples: int | None = None,
    budget_s: float | None = None,
    seed: int = 0,
    spread: float | None = None,
    on_episode: Callable[[str, int, dict], None] | None = None,
) -> dict:
    """The base policy and Best-of-N on the simulated arm from the same initial states (`seeds`):
    success of each, the gain, and the search's decision statistics."""
    from worldsample.evaluation.real import run_episodes
    from worldsample.sim import make_env

    cams = [k.removeprefix("image_") for k in model.cfg.image_keys]
    env = make_env(env_cfg.model_copy(update={"cameras": cams}))
    planner = BestOfN(model, actor, n, horizon, samples=samples, budget_s=budget_s, seed=seed, spread=spread)
    t0 = time.perf_counter()
    try:
        base = []
        for i, s in enumerate(seeds):
            base += run_episodes(env, lambda obs: actor.act(obs), [s])
            if on_episode:
                on_episode("base", i, base[-1])
        t_base = time.perf_counter() - t0
        searched = []
        for i, s in enumerate(seeds):
            searched += run_episodes(env, planner.act, [s], on_reset=planner.reset)
            if on_episode:
                on_episode("search", i, searched[-1])
    finally:
        env.close()
    rate = lambda eps: sum(e["success"] for e in eps) / max(len(eps), 1)  # noqa: E731
    return {
        "policy": f"v{actor.version}",
        "version": actor.version,
        "n": n,
        "horizon": horizon,
        "samples": planner.samples,
        "budget_s": budget_s,
        "episodes": len(seeds),
        "seeds": list(seeds),
        "base_success": rate(base),
        "search_success": rate(searched),
        "gain": rate(searched) - rate(base),
        "base_mean_return": sum(e["return"] for e in base) / max(len(base), 1),
        "search_mean_return": sum(e["return"] for e in searched) / max(len(searched), 1),
        "base_seconds": t_base,
        "search_seconds": time.perf_counter() - t0 - t_base,
        "decisions": planner.stats.to_dict(),
        "base_episodes": base,
        "search_episodes": searched,
    }
