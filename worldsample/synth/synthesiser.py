"""The synthesiser: branch points from recent real episodes -> perturbed actions -> imagined
rollouts -> filtered, labelled synthetic episodes in the store's `synthetic` group.

Filters: non-finite values and vector values outside the range the source episodes cover (see
bounds.py) drop a branch; the uncertainty veto cuts a branch before the first step the world model
is less sure of than it is on held-out real data (world_model/uncertainty.py), and drops it when
that is its first step. Each is counted per reason. The `synthetic` group is a bounded pool (`pool_max_steps`).

A branch's actions are the source segment's logged actions, perturbed (branching.py), or, with
`actions: policy`, sampled from the newest exported policy acting on what the world model imagines
(MBPO-style: the data follows the policy being learned, from real states).

Each synthetic episode keeps its provenance (source group, episode and branch step, world-model
version). Its first observation is the real one it branched from; the rest are imagined. Rewards
and success come from the world model's heads; a predicted success ends the episode (terminal),
as it ends a real one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from worldsample.errors import ConfigError, EpisodeRejected
from worldsample.store import EpisodeStore, GroupSchema, KeySpec, Retention, SourceRef
from worldsample.synth.bounds import ObservedRange, outside
from worldsample.synth.branching import perturb_actions
from worldsample.synth.config import SynthConfig
from worldsample.world_model.uncertainty import gives_uncertainty

if TYPE_CHECKING:
    from worldsample.world_model.data import ReaderFactory

log = logging.getLogger(__name__)


@dataclass
class SynthStats:
    branches: int = 0
    written: int = 0
    steps: int = 0
    successes: int = 0
    unvetted: int = 0  # written without an uncertainty check: the world model gives none
    truncated: int = 0  # written, cut short before their first too-uncertain step
    dropped: dict[str, int] = field(
        default_factory=lambda: {"non_finite": 0, "out_of_bounds": 0, "uncertain": 0, "rejected": 0}
    )

    def add(self, other: SynthStats) -> None:
        self.branches += other.branches
        self.written += other.written
        self.steps += other.steps
        self.successes += other.successes
        self.unvetted += other.unvetted
        self.truncated += other.truncated
        for k, v in other.dropped.items():
            self.dropped[k] += v


def synthetic_schema(
    image_keys: list[str], vector_keys: dict[str, int], image_size: int, action_dim: int
) -> GroupSchema:
    obs = {
        k: KeySpec(dtype="uint8", shape=(image_size, image_size, 3), kind="image", camera=k.removeprefix("image_"))
        for k in image_keys
    }
    obs.update({k: KeySpec(dtype="float32", shape=(n,), finite=True) for k, n in vector_keys.items()})
    return GroupSchema.build(obs, action_dim)


def veto_cuts(max_uncertainty, wm) -> np.ndarray | None:
    """The veto's cut per imagined step (the last repeats), or None when the veto cannot run: turned
    off, no disagreement in this world model, or `calibrated` without calibrated cuts."""
    if max_uncertainty is None or not gives_uncertainty(wm):
        return None
    if max_uncertainty == "calibrated":
        return np.asarray(wm.uncertainty.thresholds, np.float64) if wm.uncertainty.thresholds else None
    return np.asarray([float(max_uncertainty)])


def first_uncertain(unc: np.ndarray, cuts: np.ndarray) -> int | None:
    """Index of the first step whose disagreement exceeds its cut, None if none does."""
    per_step = cuts[np.minimum(np.arange(len(unc)), len(cuts) - 1)]
    over = np.flatnonzero(unc > per_step)
    return int(over[0]) if len(over) else None


class Synthesiser:
    """`imaginer` is a `worldsample.world_model.Imaginer` (or anything with its `rollout` and `cfg`)."""

    def __init__(
        self, store: EpisodeStore, imaginer, cfg: SynthConfig, action_low: np.ndarray, action_high: np.ndarray,
        reader: ReaderFactory | None = None,
    ):
        self.store, self.im, self.cfg = store, imaginer, cfg
        wm = imaginer.cfg
        self.keys = [*wm.image_keys, *wm.vector_keys]
        self.low, self.high = np.asarray(action_low, np.float32), np.asarray(action_high, np.float32)
        # `reader` (store, group, keys) -> the branched groups' readers; the image profile's read `latent`
        make = reader or (lambda st, g, k: st.reader(g, keys=k))
        self.readers = {g: make(store, g, self.keys) for g in cfg.groups if g in store.groups}
        schema = synthetic_schema(wm.image_keys, dict(wm.vector_keys), wm.image_size, wm.action_dim)
        store.ensure_group("synthetic", schema, Retention(max_steps=cfg.pool_max_steps))
        self.observed = ObservedRange(wm.vector_keys)
        self.limits: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.cuts = veto_cuts(cfg.max_uncertainty, wm)
        self.vetting = self.cuts is not None
        if cfg.max_uncertainty is not None and not self.vetting:
            why = ("it has no calibrated cuts (world_model.uncertainty: no held-out episode yet?)"
                   if gives_uncertainty(wm) else "it gives no uncertainty (dynamics.ensemble 1, regression generator)")
            log.warning(
                "the world model cannot be vetted: %s; the veto synth.max_uncertainty cannot run and branches are "
                "counted as synth/unvetted; set world_model.dynamics.ensemble >= 2 (or synth.max_uncertainty null "
                "to silence this)", why
            )
        self.rng = np.random.default_rng(cfg.seed)

    def real_steps(self) -> int:
        return sum(r.num_steps for g, r in self.readers.items() if g == "real")

    def _sources(self) -> list[tuple[str, int, int, bool]]:
        """(group, episode, length, success) of the recent episodes with room for a segment."""
        need = self.cfg.horizon + 1
        cands = []
        for g, r in self.readers.items():
            r.refresh()
            for rec in r.episode_records()[-self.cfg.recent_episodes:]:
                if rec.length >= need:
                    cands.append((g, rec.episode, rec.length, rec.success))
        return cands

    def _branch_points(self, cands: list[tuple[str, int, int, bool]], n: int) -> list[tuple[str, int, int]]:
        """(group, episode, step): a share `success_focus` from the last `horizon` steps before (and at) the
        success step of a successful episode, the rest uniform over the steps with a whole segment ahead."""
        if not cands:
            return []
        h = self.cfg.horizon
        wins = [c for c in cands if c[3]]
        n_focus = int(self.rng.binomial(n, self.cfg.success_focus)) if wins and self.cfg.success_focus > 0 else 0
        out = []
        if n_focus:  # the success step is an episode's last; uniform over the successful episodes
            for i in self.rng.integers(0, len(wins), size=n_focus):
                g, ep, length, _ = wins[i]
                out.append((g, ep, int(self.rng.integers(max(0, length - 1 - h), length))))
        weights = np.array([c[2] - h for c in cands], float)  # branch steps with a whole segment: length - h
        picks = self.rng.choice(len(cands), size=n - n_focus, p=weights / weights.sum())
        out += [(cands[i][0], cands[i][1], int(self.rng.integers(0, cands[i][2] - h))) for i in picks]
        return out

    def _gather(self, points):
        k, h = self.cfg.context, self.cfg.horizon + 1
        ctx = {key: [] for key in self.keys}
        ctx_act, seg = [], []
        for g, ep, t in points:
            data = self.readers[g].episode(ep, keys=[*self.keys, "action"])
            rows = np.maximum(np.arange(t - k + 1, t + 1), 0)
            for key in self.keys:
                ctx[key].append(data[key][rows])
            past = data["action"][rows[:-1]] * (np.arange(t - k + 1, t)[:, None] >= 0)  # zero before the start
            ctx_act.append(past)
            # a segment that runs past the episode's end (success focus) holds its last action from there
            seg.append(data["action"][np.minimum(np.arange(t, t + h), len(data["action"]) - 1)])
        return {key: np.stack(v) for key, v in ctx.items()}, np.stack(ctx_act), np.stack(seg)

    def generate(self, n_branches: int, wm_version: int, domain: int = 0, actor=None) -> SynthStats:
        """Imagine up to `n_branches` branches and write the ones that pass the filters. `actor`: the
        `NumpyActor` that acts in the branches, needed (and only used) with `actions: policy`."""
        if self.cfg.actions == "policy":
            if actor is None:
                raise ConfigError("synth.actions=policy needs the policy that acts in the branches; none was given")
            from worldsample.evaluation.imagined import check_fit

            check_fit(actor, self.im.cfg)
        stats = SynthStats()
        cands = self._sources()
        points = self._branch_points(cands, n_branches)
        if not points:
            return stats
        vector_keys = list(self.observed.keys)
        self.observed.update(
            [(g, ep) for g, ep, _, _ in cands], lambda src: self.readers[src[0]].episode(src[1], keys=vector_keys)
        )
        self.limits = self.observed.limits(self.cfg.bounds_margin)
        with self.store.writer("synthetic") as w:
            for i in range(0, len(points), self.cfg.batch):
                stats.add(self._batch(points[i : i + self.cfg.batch], w, wm_version, domain, actor))
        return stats

    def _batch(self, points, writer, wm_version: int, domain: int, actor=None) -> SynthStats:
        cfg, st = self.cfg, SynthStats(branches=len(points))
        context, ctx_actions, segment = self._gather(points)
        if cfg.actions == "policy":  # a stochastic policy samples each step on what it is shown
            from worldsample.evaluation.imagined import batch_policy

            actions, policy = None, batch_policy(actor, explore=actor.config.stochastic, rng=self.rng)
        else:
            actions, policy = perturb_actions(segment, self.rng, cfg.scale, cfg.sigma, self.low, self.high), None
        roll = self._imagine(points, context, ctx_actions, actions, domain, policy)
        actions = roll.actions if actions is None else actions
        for b, (g, ep, t) in enumerate(points):
            obs = {key: np.concatenate([context[key][b, -1:], roll.frames[key][b, :-1]]) for key in self.keys}
            reward = roll.reward[b]
            if cfg.success_threshold is None:  # the world model's own threshold, calibrated on held-out real data
                success, terminal = roll.success_label[b], roll.success_label[b] | roll.done_label[b]
            else:
                success = terminal = roll.success[b] > cfg.success_threshold
            why = self._reject_reason(obs, reward)
            if why:
                st.dropped[why] += 1
                continue
            # a predicted success or end of episode ends the branch there, as terminal
            end = int(np.argmax(terminal)) + 1 if terminal.any() else len(reward)
            done = np.zeros(end, bool)
            done[-1] = bool(terminal[:end].any())
            success = success[:end].copy()
            u = first_uncertain(roll.uncertainty[b], self.cuts) if self.vetting else None
            if u == 0:
                st.dropped["uncertain"] += 1
                continue
            if u is not None and u < end:
                # transitions 0..u-1 stay (their next observations are trusted); step u closes the episode
                # unbootstrapped, as a timeout does, so its own uncertain transition is never learned from
                end, done, success = u + 1, np.zeros(u + 1, bool), success[: u + 1]
                success[-1] = False
                st.truncated += 1
            step = {**{key: v[:end] for key, v in obs.items()}, "action": actions[b, :end], "reward": reward[:end],
                    "done": done, "success": success}
            unc = float(roll.uncertainty[b, :end].mean()) if roll.uncertainty is not None else None
            try:
                writer.append_episode(
                    step,
                    wm_version=wm_version,
                    domain="synthetic",
                    source=SourceRef(group=g, episode=ep, step=t),
                    extra={"uncertainty": unc},
                )
            except EpisodeRejected as e:
                log.warning("synthetic episode rejected: %s", e)
                st.dropped["rejected"] += 1
                continue
            st.written += 1
            st.unvetted += int(cfg.max_uncertainty is not None and not self.vetting)
            st.steps += end
            st.successes += int(done[-1])
        return st

    def close(self) -> None:
        """Release what the synthesiser holds beyond the store (the oracle's arm)."""

    def _imagine(self, points, context, ctx_actions, actions, domain: int, policy=None):
        """The branches' rollouts (frames, reward, labels, uncertainty; with a `policy` in place of
        `actions`, the actions it took) from the world model; the oracle (sim_replay.py) plays them on
        the simulated arm instead."""
        return self.im.rollout(
            context,
            actions,
            context_actions=ctx_actions if self.cfg.context > 1 else None,
            domain=domain,
            seed=int(self.rng.integers(2**31)),
            uncertainty=self.vetting,
            policy=policy,
            horizon=self.cfg.horizon + 1,  # as the segments: the last imagined frame is the last step's next obs
        )

    def _reject_reason(self, obs, reward) -> str | None:
        vectors = [v for k, v in obs.items() if not k.startswith("image_")]
        if not np.isfinite(reward).all() or not all(np.isfinite(v).all() for v in vectors):
            return "non_finite"
        cap = self.cfg.max_abs_vector
        if outside(obs, self.limits) or (cap is not None and any(np.abs(v).max() > cap for v in vectors)):
            return "out_of_bounds"
        return None
