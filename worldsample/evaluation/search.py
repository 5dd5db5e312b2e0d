"""Best-of-N search in the world model: at each decision, N candidate action chunks of `horizon`
steps are imagined from the real history, scored by the world model's heads, and the first action
of the best chunk is executed (then the search runs again on the next real observation).

Candidates: chunk 0 is the base policy itself (its deterministic action at every imagined step);
chunks 1..N-1 sample the stochastic policy at every imagined step (its tanh-squashed Gaussian), or,
with `spread`, add N(0, spread^2) to the deterministic action (a deterministic policy). Each chunk is
produced closed loop on its first imagined future and, when the model is stochastic, replayed on
`samples - 1` more. Scores (`score`):

- `success` (default): the mean discounted imagined success (gamma^(t-1) for a success label at
  imagined step t, 0 without one: sooner is better, and a longer chunk must not win by piling up
  reward before it succeeds), then the mean predicted return;
- `value`: the mean over samples of the learner's discounted return so far plus the critic's value
  where the chunk ends, G = sum_{t=1..L} gamma^(t-1) r_t + [not ended] gamma^L V(s_L), with
  V(s) = Q(s, pi(s)) for the base policy's deterministic action, Q, gamma and r the learner's
  (critic.py: r_t is the success label for `loop.reward=success`, the predicted reward times
  `loop.reward_scale` for `task`). A chunk ended by a success or done label is not bootstrapped
  (terminal, as the learner's targets); one that reaches the horizon is. The critic sees past the
  horizon, where the success labels of a short chunk see nothing.
- `critic`: no world model at all, the ablation that says what the model adds to `value`: the
  candidates' first actions (the base action, then the same spread or samples) ranked by the
  critic's Q(s, a) at the real observation.

Ties go to the lower index, so to the base policy. With N = 1 the only candidate is the base
policy, and the executed actions are the base policy's.

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
from worldsample.evaluation.critic import Critic
from worldsample.evaluation.imagined import ClosedLoop, ClosedLoopResult, check_fit, is_stochastic
from worldsample.evaluation.scoring import GAMMA, best_candidate, success_keys
from worldsample.policy import NumpyActor


@dataclass
class SearchStats:
    decisions: int = 0
    searched: int = 0  # decisions that imagined every candidate to the end and executed the best
    fallbacks: int = 0  # decisions stopped by the time budget: the base policy's action was executed
    overruns: int = 0  # decisions that ended over the budget all the same
    chose_base: int = 0  # searched decisions whose best candidate was the base policy's chunk
    best_score_sum: float = 0.0  # of the chosen candidate, over searched decisions
    base_score_sum: float = 0.0  # of the base chunk, over searched decisions
    max_decision_s: float = 0.0
    total_decision_s: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mean_decision_s"] = self.total_decision_s / self.decisions if self.decisions else None
        d["mean_best_score"] = self.best_score_sum / self.searched if self.searched else None
        d["mean_base_score"] = self.base_score_sum / self.searched if self.searched else None
        return d


SCORES = ("success", "value", "critic")


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
        gamma: float = GAMMA,
        domain: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        score: str = "success",
        critic: Critic | None = None,
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
        if score not in SCORES:
            raise ConfigError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
        if score in ("value", "critic"):
            if critic is None:
                raise ConfigError(f"score={score} needs the learner's critic (load_critic(run))")
            unknown = [k for k in critic.obs_keys if k not in model.cfg.vector_keys]
            if unknown:
                raise ConfigError(f"the critic reads {unknown}, which the world model does not predict "
                                  f"({list(model.cfg.vector_keys)})")
            gamma = critic.gamma  # the critic's values are discounted by the learner's gamma
        check_fit(actor, model.cfg)
        self.score, self.critic = score, critic
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
        self.last: dict | None = None  # the last searched decision: scores, best index, candidate actions

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

    def executed(self, action: np.ndarray) -> None:
        """The arm executed `action` instead of the last decision's (a human took over): the imagined
        history of the next decisions holds what was done."""
        if self.K > 1 and self._acts:
            self._acts[-1] = np.asarray(action, np.float32)

    # -- one decision ------------------------------------------------------------------------------

    def _candidate(self, c: int, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Candidate c's action at `obs`: the policy's own for c = 0, else that action plus
        N(0, spread^2) (clipped to the action range) or a sample of the stochastic policy."""
        if c == 0:
            return self.actor.act(obs)
        if self.spread is not None:
            a = self.actor.act(obs) + self.rng.normal(0.0, self.spread, self.low.shape)
            return np.clip(a, self.low, self.high)
        return self.actor.act(obs, explore=True, rng=self.rng)

    def _by_critic(self, obs: dict[str, np.ndarray], base: np.ndarray, warmup: bool) -> np.ndarray:
        """score=critic: the candidate whose first action the critic values most, no imagination."""
        acts = np.stack([base, *(self._candidate(c, obs) for c in range(1, self.n))]).astype(np.float32)
        q = self.critic.q({k: np.repeat(np.asarray(obs[k])[None], self.n, axis=0) for k in self.critic.obs_keys},
                          acts)
        best = int(np.argmax(q))  # the first of equal values: the base action
        self.last = {"scores": [float(v) for v in q], "best": best, "actions": acts[:, None].copy()}
        if not warmup:
            self.stats.chose_base += best == 0
            self.stats.best_score_sum += float(q[best])
            self.stats.base_score_sum += float(q[0])
        return acts[best]

    def _candidate_policy(self):
        n, S, actor = self.n, self.samples, self.actor
        keys = [o.key for o in actor.config.obs]

        def policy(obs: dict[str, np.ndarray], t: int) -> np.ndarray:
            out = np.empty((n * S, actor.config.action_dim), np.float32)
            for c in range(n):
                lead = {k: obs[k][c * S] for k in keys}  # the chunk follows its first imagined future
                out[c * S : (c + 1) * S] = self._candidate(c, lead)
            return out

        return policy

    def _decide(self, budgeted: bool, t0: float | None = None, warmup: bool = False) -> tuple[np.ndarray, bool]:
        obs = self._obs[-1]
        base = self.actor.act(obs)
        if self.score == "critic":
            return self._by_critic(obs, base, warmup), True
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
        keys = self._scores(res)
        best = best_candidate(keys)
        self.last = {"scores": [k[0] for k in keys], "best": best, "actions": res.actions[::S].copy()}
        if not warmup:
            self.stats.chose_base += best == 0
            self.stats.best_score_sum += keys[best][0]
            self.stats.base_score_sum += keys[0][0]
        return res.actions[best * S, 0].astype(np.float32), True

    def _scores(self, res: ClosedLoopResult) -> list[tuple[float, ...]]:
        """Per candidate, what ranks it (compared as tuples, first element the score)."""
        S, g = self.samples, self.gamma
        if self.score == "success":  # the rule the bridge's search shares (scoring.py)
            return success_keys(res.success, res.length, res.returns, self.n, S, g)
        return [(float(v),) for v in self.values(res).reshape(self.n, S).mean(axis=1)]

    def values(self, res: ClosedLoopResult) -> np.ndarray:
        """(rows,) the learner's discounted return of each imagined row plus gamma^L V(s_L) where it
        did not end (see the module's docstring)."""
        critic, g = self.critic, self.gamma
        T = res.reward.shape[1]
        if critic.reward == "task":
            ret = (res.reward * critic.reward_scale * g ** np.arange(T)[None]).sum(axis=1)
        else:  # success (or the classifier's success): 1 at the successful step
            ret = res.success * g ** (res.length - 1.0)
        open_ = ~res.ended & (res.length > 0)
        if open_.any():
            end = {k: np.asarray(v)[open_] for k, v in res.final_obs.items()}
            keys = [o.key for o in self.actor.config.obs]
            acts = np.stack([self.actor.act({k: end[k][i] for k in keys}) for i in range(int(open_.sum()))])
            ret = ret.astype(np.float64)
            ret[open_] += g ** res.length[open_] * critic.q(end, acts)
        return ret


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
    score: str = "success",
    critic: Critic | None = None,
) -> dict:
    """The base policy and Best-of-N on the simulated arm from the same initial states (`seeds`):
    success of each, the gain, and the search's decision statistics. `score` and `critic`: see
    `BestOfN` (value needs the critic, `worldsample.evaluation.critic.load_critic`)."""
    from worldsample.evaluation.real import run_episodes
    from worldsample.sim import make_env

    cams = [k.removeprefix("image_") for k in model.cfg.image_keys]
    env = make_env(env_cfg.model_copy(update={"cameras": cams}))
    planner = BestOfN(model, actor, n, horizon, samples=samples, budget_s=budget_s, seed=seed, spread=spread,
                      score=score, critic=critic)
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
        "score": score,
        "gamma": planner.gamma,
        "critic": None if critic is None else dict(critic.source),
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
