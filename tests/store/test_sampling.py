import numpy as np
import pytest

from worldsample.errors import StoreError
from worldsample.store import GroupSampler, MixtureSampler, split_counts

from .helpers import make_episode, new_store


def filled(tmp_path, group="demo", specs=((6, False), (4, True), (9, False))):
    store = new_store(tmp_path, group=group)
    eps = []
    with store.writer(group) as w:
        for i, (length, terminal) in enumerate(specs):
            data = make_episode(i, length, terminal)
            w.append_episode(data)
            eps.append(data)
    return store, eps


def test_transitions_pair_each_step_with_its_successor(tmp_path):
    store, eps = filled(tmp_path)
    s = GroupSampler(store.reader("demo"))
    # 5 + 4 + 8 valid transitions: truncated last steps excluded, terminal last step kept
    assert s.num_transitions == 17
    b = s.transitions(np.random.default_rng(0), 4000)
    t, ep = b["obs/proprio"][:, 0], b["obs/proprio"][:, 1].astype(int)
    nt, nep = b["next_obs/proprio"][:, 0], b["next_obs/proprio"][:, 1].astype(int)
    assert (ep == nep).all()
    lengths = np.array([6, 4, 9])
    last = t == lengths[ep] - 1
    assert (ep[last] == 1).all(), "only the terminal episode's last step may be sampled"
    assert (b["done"] == last).all()
    assert (nt[~last] == t[~last] + 1).all() and (nt[last] == t[last]).all()
    for i in range(3):  # action and reward come from the sampled step itself
        sel = ep == i
        np.testing.assert_array_equal(b["action"][sel], eps[i]["action"][t[sel].astype(int)])
        np.testing.assert_array_equal(b["reward"][sel], eps[i]["reward"][t[sel].astype(int)])
    assert set(np.unique(t[ep == 2]).astype(int)) == set(range(8))


def brute_nstep(ep, terminal, t, n, gamma):
    L = len(ep["reward"])
    m = min(n, L - t if terminal else L - 1 - t)
    ret = sum(gamma**k * ep["reward"][t + k] for k in range(m))
    return ret, m, min(t + m, L - 1), terminal and t + m >= L


def test_nstep_returns_match_brute_force(tmp_path):
    specs = ((6, False), (4, True), (9, False))
    store, eps = filled(tmp_path, specs=specs)
    s = GroupSampler(store.reader("demo"))
    gamma = 0.9
    for n in (1, 3, 5):
        b = s.nstep(np.random.default_rng(n), 500, n, gamma)
        for j in range(500):
            i, t = int(b["obs/proprio"][j, 1]), int(b["obs/proprio"][j, 0])
            ret, m, nt, done = brute_nstep(eps[i], specs[i][1], t, n, gamma)
            assert b["reward"][j] == pytest.approx(ret, rel=1e-5)
            assert b["n_step"][j] == m
            assert b["discount"][j] == pytest.approx(gamma**m)
            assert int(b["next_obs/proprio"][j, 0]) == nt
            assert bool(b["done"][j]) == done


def test_windows_stay_inside_one_episode(tmp_path):
    store, _ = filled(tmp_path)
    s = GroupSampler(store.reader("demo"))
    w = s.windows(np.random.default_rng(0), 300, 5, keys=["proprio", "image_cam"])
    assert w["proprio"].shape == (300, 5, 3) and w["image_cam"].shape == (300, 5, 8, 8, 3)
    ep = w["proprio"][:, :, 1]
    assert (ep == ep[:, :1]).all()
    assert (np.diff(w["proprio"][:, :, 0], axis=1) == 1).all()
    assert set(np.unique(ep).astype(int)) == {0, 2}  # episode 1 (length 4) is too short
    with pytest.raises(StoreError, match="no windows of length 10"):
        s.windows(np.random.default_rng(0), 2, 10)


def test_sampler_sees_new_commits(tmp_path):
    store, _ = filled(tmp_path)
    s = GroupSampler(store.reader("demo"))
    before = s.num_transitions
    with store.writer("demo") as w:
        w.append_episode(make_episode(9, 5, terminal=True))
    assert s.num_transitions == before
    s.refresh()
    assert s.num_transitions == before + 5


@pytest.mark.parametrize(
    "weights,batch,want",
    [
        ({"a": 0.5, "b": 0.5}, 256, {"a": 128, "b": 128}),
        ({"a": 1, "b": 2}, 10, {"a": 3, "b": 7}),
        ({"a": 1, "b": 1, "c": 1}, 4, {"a": 2, "b": 1, "c": 1}),
    ],
)
def test_split_counts(weights, batch, want):
    assert split_counts(weights, batch) == want


def test_mixture_by_weight_and_empty_group_fallback(tmp_path):
    store, _ = filled(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    samplers = {g: GroupSampler(store.reader(g)) for g in ("demo", "real")}
    mix = MixtureSampler(samplers, {"demo": 0.5, "real": 0.5})
    b = mix.sample(np.random.default_rng(0), 64)
    assert mix.composition == {"demo": 64}  # real is still empty: demo takes the whole batch
    with store.writer("real") as w:
        w.append_episode(make_episode(5, 12))
    samplers["real"].refresh()
    b = mix.sample(np.random.default_rng(0), 64, n=3, gamma=0.97)
    assert mix.composition == {"demo": 32, "real": 32}
    assert (b["group"] == "real").sum() == 32 and b["obs/image_cam"].shape == (64, 8, 8, 3)
    assert (b["obs/proprio"][b["group"] == "real", 1] == 5).all()
    with pytest.raises(StoreError, match="without a sampler"):
        MixtureSampler(samplers, {"synthetic": 1.0})


def test_where_restricts_to_matching_episodes(tmp_path):
    store, _ = filled(tmp_path)
    reader = store.reader("demo")
    only_terminal = GroupSampler(reader, where=lambda rec: rec.terminated)
    b = only_terminal.transitions(np.random.default_rng(0), 200)
    assert (b["obs/proprio"][:, 1] == 1).all()
    none = GroupSampler(reader, where=lambda rec: rec.episode > 99)
    assert none.num_transitions == 0
    with pytest.raises(StoreError, match="no transitions"):
        none.transitions(np.random.default_rng(0), 1)


def test_reward_key_sums_another_step_key(tmp_path):
    """reward_key="success": sparse 1 at the successful step, n-step sums it like any reward."""
    store = new_store(tmp_path)
    with store.writer("demo") as w:
        w.append_episode(make_episode(0, 6, terminal=True))  # success (and done) only at the last step
    s = GroupSampler(store.reader("demo"), reward_key="success")
    b = s.nstep(np.random.default_rng(0), 200, n=3, gamma=0.5)
    t = b["index"]
    want = np.where(t == 5, 1.0, np.where(t == 4, 0.5, np.where(t == 3, 0.25, 0.0)))
    np.testing.assert_allclose(b["reward"], want)
    with pytest.raises(StoreError, match="does not cache key"):
        GroupSampler(store.reader("demo"), reward_key="nope")
