"""Hindsight goal relabelling (HER, Andrychowicz et al. 2017) of the arm's own steps (`loop.relabel_goals`).

A failed push still shows where the object went. On a share of each batch's `online` rows (the real
episodes, drawn as plain transitions, not imitated) the goal in the 39-dim task state (`state`, dims
36-38, in the observation and the next one) becomes the object's position at a later step of the same
episode, chosen uniformly (HER's `future` strategy). The reward and the end are recomputed for that goal
with the task's own test: success when the object is within `radius` of it (push-v3: 5 cm), the
episode ending at the first such step, as the simulated arm ends it at the real goal. So every
episode in which the object moved teaches the critics what reaches a goal, not only the few the
policy won.

The rows imitated (demonstrations, the human's steps, the arm's own wins) keep their goals: their
actions are right for the goal they were played for. The layout is the simulated arm's
(worldsample/sim/layout.py); a real arm has it only with an object tracker and a goal in the state.
"""

from __future__ import annotations

import numpy as np

from worldsample.sim.layout import GOAL, OBJECT, STATE_DIM

Batch = dict[str, np.ndarray]
SOURCE = "online"  # the mixer's name of the real episodes' transitions
_NONE = {"relabel/share": 0.0, "relabel/won": 0.0}


def relabel_goals(batch: Batch, cache, keys: list[str], rng: np.random.Generator, share: float, radius: float,
                  n: int, gamma: float, state_key: str = "state", moved_only: bool = False
                  ) -> tuple[Batch, dict[str, float]]:
    """The batch with `share` of its `online` rows relabelled in place (module docstring), and metrics:
    the share of the batch relabelled and the share of those that reach their new goal within the backup.

    `cache` is the cache of the `online` sampler's reader (the rows' `index` points into it); `n` the
    steps each backup sums (learner.n_step). `moved_only`: the goal only from a step where the object is
    more than `radius` from where it is at the row's own step (a goal the row has not reached already);
    a row with no such later step keeps its goal."""
    rows = np.flatnonzero(batch["source"] == SOURCE)
    rows = rows[rng.random(len(rows)) < share]
    t = batch["index"][rows]
    episode = np.searchsorted(cache.ep_start, t, side="right") - 1
    last = cache.ep_start[episode] + cache.ep_len[episode] - 1  # the episode's last stored step
    room = last - t  # later steps with an observation: the goal's candidates and the backup's reach
    keep = room >= 1
    rows, t, room = rows[keep], t[keep], room[keep]
    if not len(rows):
        return batch, dict(_NONE)
    state = cache.view(state_key)
    if state.shape[-1] != STATE_DIM:
        raise ValueError(f"loop.relabel_goals reads the {STATE_DIM}-dim state from {state_key!r}, got "
                         f"{state.shape[-1]} dims")
    if moved_only:
        later, ok = _moved_goals(state, t, room, radius, rng)
        rows, t, room, later = rows[ok], t[ok], room[ok], later[ok]
        if not len(rows):
            return batch, dict(_NONE)
    else:
        later = t + 1 + (rng.random(len(t)) * room).astype(np.int64)
    goal = state[later, OBJECT]
    m = np.minimum(n, room)  # steps summed, each with its next observation
    k = np.arange(1, n + 1)
    ahead = np.minimum(t[:, None] + k, (t + room)[:, None])
    near = np.linalg.norm(state[ahead][:, :, OBJECT] - goal[:, None], axis=-1) <= radius
    hit = near & (k[None, :] <= m[:, None])
    won = hit.any(axis=1)
    steps = np.where(won, hit.argmax(axis=1) + 1, m)
    nxt = t + steps
    for key in keys:
        batch[f"next_obs/{key}"][rows] = cache.view(key)[nxt]
    batch[f"obs/{state_key}"][rows, GOAL] = goal
    batch[f"next_obs/{state_key}"][rows, GOAL] = goal
    batch["reward"][rows] = np.where(won, gamma ** (steps - 1.0), 0.0)
    batch["done"][rows] = won
    batch["n_step"][rows] = steps
    if "discount" in batch:
        batch["discount"][rows] = gamma ** steps.astype(np.float64)
    return batch, {"relabel/share": len(rows) / len(batch["reward"]), "relabel/won": float(won.mean())}


def _moved_goals(state: np.ndarray, t: np.ndarray, room: np.ndarray, radius: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(a later step per row, chosen uniformly among those where the object is more than `radius` from
    where it is at t; whether the row has one)."""
    k = np.arange(1, int(room.max()) + 1)
    ahead = np.minimum(t[:, None] + k, (t + room)[:, None])
    far = np.linalg.norm(state[ahead][:, :, OBJECT] - state[t][:, None, OBJECT], axis=-1) > radius
    far &= k[None, :] <= room[:, None]
    pick = np.where(far, rng.random(far.shape), -1.0).argmax(axis=1)  # uniform among the far ones
    return t + 1 + pick, far.any(axis=1)
