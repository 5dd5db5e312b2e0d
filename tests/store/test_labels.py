"""Operator labels beside committed episodes: the label file (append-only, checksummed lines,
one request labels once), and what cached readers, the learner's sampler and the world model's
windows see after a label (the data on disk never changes)."""

from __future__ import annotations

import numpy as np
import pytest

from worldsample.errors import StoreError
from worldsample.store import EpisodeStore, GroupSampler
from worldsample.world_model.data import WindowSource

from .helpers import make_episode, new_store

L = 6


def three_episodes(tmp_path) -> EpisodeStore:
    """0: a recorded success (success and done at its last step, terminal); 1 and 2: time-limit cuts."""
    store = new_store(tmp_path, group="real")
    with store.writer("real") as w:
        w.append_episode(make_episode(0, L, terminal=True))
        w.append_episode(make_episode(1, L))
        w.append_episode(make_episode(2, L))
    return store


def rewarded(sampler: GroupSampler, seed: int = 0) -> dict[int, dict[int, tuple[float, bool]]]:
    """episode -> {step: (reward, done)} over every transition a large batch drew (the learner's
    success reward: reward_key="success")."""
    batch = sampler.transitions(np.random.default_rng(seed), 4000)
    c = sampler.reader.cache
    out: dict[int, dict[int, tuple[float, bool]]] = {}
    for row, r, d in zip(batch["index"], batch["reward"], batch["done"]):
        i = int(np.searchsorted(c.ep_start, row, side="right") - 1)
        out.setdefault(c.episode_ids[i], {})[int(row - c.ep_start[i])] = (float(r), bool(d))
    return out


def test_labels_change_the_learners_reward_and_follow_the_newest_verdict(tmp_path):
    store = three_episodes(tmp_path)
    sampler = GroupSampler(store.reader("real"), obs_keys=["proprio"], reward_key="success")
    seen = rewarded(sampler)
    assert seen[0][L - 1] == (1.0, True) and sum(r for r, _ in seen[0].values()) == 1.0
    assert L - 1 not in seen[1] and all(r == 0.0 for r, _ in seen[1].values())  # a cut's last step is not sampled

    labels = store.labels("real")
    labels.append(0, False, source="dashboard", reason="the block fell after the detector fired")
    labels.append(1, True, source="dashboard")
    sampler.refresh()
    seen = rewarded(sampler)
    assert all(r == 0.0 for r, _ in seen[0].values()) and L - 1 not in seen[0]  # no reward; a cut now
    assert seen[1][L - 1] == (1.0, True) and sum(r for r, _ in seen[1].values()) == 1.0  # sparse 1 at the end
    assert all(r == 0.0 for r, _ in seen[2].values()) and L - 1 not in seen[2]  # unlabelled: as recorded

    labels.append(0, True)  # the newest verdict wins: episode 0 is as recorded again
    sampler.refresh()
    assert rewarded(sampler)[0][L - 1] == (1.0, True)
    # nothing on disk changed
    r = store.reader("real", cache=False)
    assert r.records[0].success and not r.records[1].success
    assert r.episode(1, ["success"])["success"].sum() == 0


def test_a_label_written_before_the_reader_opens_applies_when_episodes_are_cached(tmp_path):
    store = three_episodes(tmp_path)
    store.labels("real").append(2, True)
    reader = store.reader("real")
    assert reader.labels[2].success is True
    seen = rewarded(GroupSampler(reader, obs_keys=["proprio"], reward_key="success"))
    assert seen[2][L - 1] == (1.0, True)
    # the world model's success and done labels come from the same cache
    windows = WindowSource(store, {"real": 1.0}, ["proprio"], holdout_every=0)
    c = windows.groups["real"].cache
    ends = {e: int(s + n - 1) for e, s, n in zip(c.episode_ids, c.ep_start, c.ep_len)}
    assert windows.table("real", "success")[ends[2]] and windows.table("real", "done")[ends[2]]
    store.labels("real").append(0, False)
    windows.refresh()
    assert not windows.table("real", "success").any(where=np.arange(c.size) <= ends[0])
    assert not windows.table("real", "done")[ends[0]]


def test_the_label_file_skips_damaged_lines_and_labels_a_request_once(tmp_path, caplog):
    store = three_episodes(tmp_path)
    log = store.labels("real")
    first = log.append(0, False, request="a" * 32)
    again = log.append(0, True, request="a" * 32)  # delivered twice: labelled once
    assert again == first and len(log.read()) == 1
    log.append(1, True)
    with pytest.raises(StoreError, match="no committed episode 9"):
        log.append(9, True)
    lines = log.path.read_bytes().splitlines(keepends=True)
    garbled = lines[0].replace(b'"success":false', b'"success":true')  # crc no longer matches
    log.path.write_bytes(garbled + b"{not json\n" + lines[1])
    reader = store.reader("real")
    assert set(reader.labels) == {1} and reader.label_log.malformed == 2
    assert "crc does not match" in caplog.text
    log.append(2, False)  # appending keeps the damaged lines as they are and adds after them
    assert set(log.current()) == {1, 2} and log.malformed == 2
