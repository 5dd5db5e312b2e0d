"""Policies run closed loop inside the world model: the policy acts on imagined observations, the
world model answers with the next latent, and its heads say reward, success and done.

`ClosedLoop.run` is the engine (also used by Best-of-N, search.py); `score_policy` scores one
policy version from a set of initial observations, `samples` imagined futures per start when the
model is stochastic (a diffusion, consistency or drift generator, or context noise at imagination
time). An imagined episode ends at the first step whose success or done probability is above the
threshold calibrated on held-out real episodes (heads.py), as the synthesiser labels its branches;
its return is the sum of the predicted rewards up to there. Randomness comes from one seeded CPU
generator per batch, so a score is reproducible under its seed on any device.

The context is padded the way the model was trained for episode starts (the first frame repeated
with zero actions), and with `autoencoder.residual_decode` an imagined frame is the last real one
plus the decoded change since it, as the Imaginer gives it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from worldsample.errors import ConfigError
from worldsample.evaluation.starts import Starts
from worldsample.paths import RunFiles
from worldsample.policy import NumpyActor
from worldsample.versioned import VersionedDir
from worldsample.world_model.imagine import Imaginer, Policy


@dataclass
class ClosedLoopResult:
    actions: np.ndarray  # (B, T, A) what the policy did, T <= horizon
    reward: np.ndarray  # (B, T) predicted reward, 0 after the row's end
    success_prob: np.ndarray  # (B, T) success-head probability, 0 after the row's end
    success: np.ndarray  # (B,) bool: a success label before the end
    returns: np.ndarray  # (B,) sum of predicted rewards up to the end
    length: np.ndarray  # (B,) imagined steps up to and including the end
    completed: bool = True  # False: `before_step` stopped it early
    obs: dict[str, np.ndarray] | None = None  # with `record_obs`: key -> (B, T, ...) observation after each step
    ended: np.ndarray | None = None  # (B,) bool: a success or done label ended the row before the horizon's end
    final_obs: dict[str, np.ndarray] | None = None  # key -> (B, ...) the observation after the last step taken


def is_stochastic(model) -> bool:
    """Whether two imagined futures of the same start and actions can differ."""
    return bool(model.generator.stochastic or model.cfg.dynamics.context_noise_infer > 0)


class ClosedLoop:
    """A policy's imagined episodes: the Imaginer's closed-loop rollout, each row cut at its first
    success or done label, with what scoring reads (success, return and length up to the end)."""

    def __init__(self, model, domain: int = 0):
        self.model, self.cfg, self.domain = model.eval(), model.cfg, domain
        self.keys = [*self.cfg.image_keys, *self.cfg.vector_keys]
        self.imaginer = Imaginer(self.model)

    def run(
        self,
        context: Mapping[str, np.ndarray],
        policy: Policy,
        horizon: int,
        seed: int = 0,
        context_actions: np.ndarray | None = None,
        before_step: Callable[[int], bool] | None = None,
        record_obs: bool = False,
    ) -> ClosedLoopResult:
        """context: key -> (B, k, ...) real frames, oldest first; context_actions: (B, k-1, A) between them.
        `before_step(t)` is asked before each imagined step; False stops the rollout there. The rollout
        stops once every row has ended (rows are masked after their own end)."""
        missing = [k for k in self.keys if k not in context]
        if missing:
            raise ConfigError(f"the world model needs {missing} in the context; got {sorted(context)}")
        r = self.imaginer.rollout(dict(context), context_actions=context_actions, domain=self.domain, seed=seed,
                                  policy=policy, horizon=horizon, before_step=before_step, until_end=True)
        ends = r.success_label | r.done_label  # (B, T)
        # a row is alive at step t if no label ended it before t; the step that ends it still counts
        alive = np.ones_like(ends)
        alive[:, 1:] = ~np.logical_or.accumulate(ends, axis=1)[:, :-1]
        reward = np.where(alive, r.reward, 0.0)
        last_real = {key: np.asarray(context[key])[:, -1] for key in self.keys}
        T = r.reward.shape[1]
        return ClosedLoopResult(
            actions=r.actions,
            reward=reward,
            success_prob=np.where(alive, r.success, 0.0),
            success=(alive & r.success_label).any(axis=1),
            returns=reward.sum(axis=1, dtype=np.float64),
            length=alive.sum(axis=1).astype(np.int64),
            completed=r.completed,
            obs=r.frames if record_obs and T else None,
            ended=ends.any(axis=1),
            # rows still alive at the end: where the horizon left them (rows that ended: stale)
            final_obs={key: r.frames[key][:, -1] for key in self.keys} if T else last_real,
        )


# -- one policy version, scored ------------------------------------------------------------------


def check_fit(actor: NumpyActor, wm_cfg) -> None:
    """The policy must read only vectors the world model predicts, with the same sizes and action size."""
    for o in actor.config.obs:
        have = wm_cfg.vector_keys.get(o.key)
        if have != o.dim:
            raise ConfigError(
                f"policy v{actor.version} reads {o.key} of size {o.dim}; the world model predicts "
                f"{dict(wm_cfg.vector_keys)}: train the world model on the policy's observation keys"
            )
    if actor.config.action_dim != wm_cfg.action_dim:
        raise ConfigError(f"policy v{actor.version} outputs {actor.config.action_dim} actions, "
                          f"the world model takes {wm_cfg.action_dim}")


def batch_policy(actor: NumpyActor, explore: bool = False, rng: np.random.Generator | None = None) -> Policy:
    """The numpy actor over a batch, row by row (exactly what it computes on the robot)."""
    keys = [o.key for o in actor.config.obs]

    def act(obs: dict[str, np.ndarray], t: int) -> np.ndarray:
        n = len(obs[keys[0]])
        return np.stack([actor.act({k: obs[k][i] for k in keys}, explore=explore, rng=rng) for i in range(n)])

    return act


@dataclass
class ImaginedScore:
    version: int
    success_rate: float  # share of imagined episodes with a success label
    success_prob: float  # mean over imagined episodes of the highest success probability before the end
    mean_return: float  # of the predicted rewards
    mean_length: float
    starts: int
    samples: int  # imagined futures per start
    horizon: int
    seed: int
    wm_version: int | None = None
    seconds: float = 0.0
    per_start_success: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[float, float, float]:
        """What ranks policies: imagined success, then the soft success probability, then return."""
        return (self.success_rate, self.success_prob, self.mean_return)

    def to_dict(self) -> dict:
        return asdict(self)


def score_policy(
    model,
    actor: NumpyActor,
    starts: Starts,
    horizon: int,
    samples: int | None = None,
    seed: int = 0,
    domain: int = 0,
    batch: int = 256,
    wm_version: int | None = None,
) -> ImaginedScore:
    """Imagine the deterministic policy from every start, `samples` times each (default 4 when the
    model is stochastic, else 1), up to `horizon` steps."""
    if horizon < 1:
        raise ConfigError(f"horizon must be at least 1, got {horizon}")
    if len(starts) == 0:
        raise ConfigError("no initial observations to start from")
    check_fit(actor, model.cfg)
    t0 = time.perf_counter()
    samples = samples if samples is not None else (4 if is_stochastic(model) else 1)
    if samples < 1:
        raise ConfigError(f"samples must be at least 1, got {samples}")
    loop = ClosedLoop(model, domain)
    missing = [k for k in loop.keys if k not in starts.obs]
    if missing:
        raise ConfigError(f"the starts have no {missing}; the world model needs {loop.keys}")
    rows = np.repeat(np.arange(len(starts)), samples)  # start i's samples are rows i*samples ...
    policy = batch_policy(actor)
    succ, prob, ret, length = [], [], [], []
    for c, i in enumerate(range(0, len(rows), batch)):
        idx = rows[i : i + batch]
        ctx = {k: starts.obs[k][idx][:, None] for k in loop.keys}
        res = loop.run(ctx, policy, horizon, seed=seed * 100_003 + c)
        succ.append(res.success)
        prob.append(res.success_prob.max(axis=1) if res.success_prob.shape[1] else np.zeros(len(idx)))
        ret.append(res.returns)
        length.append(res.length)
    succ_a = np.concatenate(succ).reshape(len(starts), samples)
    return ImaginedScore(
        version=actor.version,
        success_rate=float(succ_a.mean()),
        success_prob=float(np.concatenate(prob).mean()),
        mean_return=float(np.concatenate(ret).mean()),
        mean_length=float(np.concatenate(length).mean()),
        starts=len(starts),
        samples=samples,
        horizon=horizon,
        seed=seed,
        wm_version=wm_version,
        seconds=time.perf_counter() - t0,
        per_start_success=[float(x) for x in succ_a.mean(axis=1)],
    )


def load_world_model(run_dir: str | Path, version: int | None = None, device: str = "cpu"):
    """(model, version) of the run's latest (or a given) world-model checkpoint."""
    from worldsample.world_model import checkpoint

    root = RunFiles.of(run_dir).world_model
    path = root if version is None else VersionedDir(root).path(version)
    model, doc = checkpoint.load(path, device=device)
    return model, int(doc["version"])
