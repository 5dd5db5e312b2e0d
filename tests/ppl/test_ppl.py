"""PPL arithmetic against hand-computed cases, and batch composition from a real store."""

import numpy as np
import pytest

from worldsample.errors import ConfigError
from worldsample.ppl import EntropyPacer, PPLConfig, q_aware_lambda, zero_weights_breaking_bound
from worldsample.ppl.mixer import NaiveMixer, PPLMixer, RealDataMixer, make_mixer, mixer_class
from worldsample.store import GroupSampler

from ..store.helpers import make_episode, new_store


@pytest.mark.parametrize(
    "q_real,q_pos,q_neg,want",
    [
        (0.5, 1.0, 0.0, 0.5),
        (0.8, 1.0, 0.0, 0.8),
        (1.5, 1.0, 0.0, 1.0),
        (-1.0, 1.0, 0.0, 0.0),
        (0.3, 0.7, 0.7, 0.5),
        (2.0, 3.0, 1.0, 0.5),
    ],
)
def test_lambda(q_real, q_pos, q_neg, want):
    assert q_aware_lambda(q_real, q_pos, q_neg) == pytest.approx(want)


def test_zero_weights_drop_the_farthest_offenders_only():
    q = np.array([1.0, 0.9, 0.1, 0.0])
    # mean 0.5 vs real 0.3: dropping 1.0 leaves mean 1/3, within 0.05
    np.testing.assert_array_equal(zero_weights_breaking_bound(q, 0.3, 0.05), [0, 1, 1, 1])
    # within tolerance already: nothing dropped
    np.testing.assert_array_equal(zero_weights_breaking_bound(q, 0.48, 0.05), [1, 1, 1, 1])
    # underestimation side: drop the lowest first; mean 0.5 vs 0.7 -> drop 0.0 -> 2/3, within 0.05
    np.testing.assert_array_equal(zero_weights_breaking_bound(q, 0.7, 0.05), [1, 1, 1, 0])
    # unreachable: every sample is far above the real mean
    np.testing.assert_array_equal(zero_weights_breaking_bound(np.array([5.0, 6.0]), 0.0, 0.1), [0, 0])


def pacer(entropy_min=-2.0, entropy_max=2.0, **cfg):
    return EntropyPacer(PPLConfig(**{"entropy_ema": 0.0, **cfg}), entropy_min=entropy_min, entropy_max=entropy_max)


def test_linear_pacing_hand_computed():
    p = pacer(pacing="linear", entropy_ema=0.5)  # H~ = (H + 2) / 4
    assert p.rho == 0.0 and p.normalised == 1.0  # nothing measured yet (the actor is not learning): no synthetic data
    p.observe(2.0)  # H = H_max
    assert p.normalised == 1.0 and p.rho == 0.0
    p.observe(-2.0)  # EMA: 0.5 * 2 + 0.5 * -2 = 0 -> H~ = (0 + 2) / 4 = 0.5
    assert p.h_ema == 0.0 and p.normalised == pytest.approx(0.5) and p.rho == pytest.approx(0.15)
    p.observe(float("nan"))  # ignored
    assert p.h_ema == 0.0
    for _ in range(60):
        p.observe(-5.0)  # below H_min: clipped to fully confident
    assert p.normalised == 0.0 and p.rho == pytest.approx(0.3)


# hyperbolic, kappa 4, p 1, no smoothing: rho = 0.3 / (1 + 4 * H~)
@pytest.mark.parametrize(
    "entropy_max,entropies,want",
    [
        # H_0 below the target (after a behaviour-cloning warm start), bounds [-2, 2]: H~ = (H + 2) / 4.
        # Anchoring on H_0 made this a switch: rho_max up to H = -2, then 0.
        (2.0, [-6.6], 0.3),  # below H_min: H~ = 0
        (2.0, [-6.6, 0.0], 0.1),  # H~ = 0.5: 0.3 / 3
        (2.0, [-6.6, -1.0], 0.15),  # H~ = 0.25: 0.3 / 2
        (2.0, [-6.6, 2.0], 0.06),  # H~ = 1: 0.3 / 5, never rescaled to 0
        (2.0, [-6.6, 5.0], 0.06),  # above H_max: clipped to 1
        # H_0 above the target, bounds [-2, 6]: H~ = (H + 2) / 8. Anchoring on H_0 gave H~ = 1 (rho 0) at H_0.
        (6.0, [2.0], 0.1),  # H~ = 0.5
        (6.0, [2.0, 0.0], 0.15),  # H~ = 0.25
        (6.0, [2.0, -2.0], 0.3),  # H~ = 0
    ],
)
def test_hyperbolic_pacing_hand_computed(entropy_max, entropies, want):
    p = pacer(entropy_max=entropy_max, pacing="hyperbolic", kappa=4.0, p=1.0)
    for h in entropies:
        p.observe(h)
    assert p.rho == pytest.approx(want)
    assert p.h0 == entropies[0]  # the first entropy is kept, as a metric


def test_hyperbolic_pacing_with_p_2_and_the_defaults():
    p = pacer(pacing="hyperbolic", kappa=4.0, p=2.0)
    p.observe(0.0)  # H~ = 0.5: 0.3 / (1 + 4 * 0.25) = 0.15
    assert p.rho == pytest.approx(0.15)
    assert PPLConfig().pacing == "hyperbolic"  # ALGORITHMS.md §1: rho_max / (1 + kappa * H~^p)


@pytest.mark.parametrize("pacing,kappa,p", [("linear", 4.0, 1.0), ("hyperbolic", 4.0, 1.0), ("hyperbolic", 10.0, 3.0)])
def test_rho_falls_monotonically_with_the_entropy(pacing, kappa, p):
    grid = np.linspace(-8.0, 8.0, 161)
    rhos = []
    for h in grid:
        pc = pacer(entropy_min=-2.0, entropy_max=4 * np.log(2), pacing=pacing, kappa=kappa, p=p)
        pc.observe(float(h))
        rhos.append(pc.rho)
    rhos = np.array(rhos)
    assert (np.diff(rhos) <= 1e-12).all()
    inside = (grid > -2.0) & (grid < 4 * np.log(2))
    assert (np.diff(rhos[inside]) < 0).all()  # strictly between the bounds: a schedule, not a switch
    assert rhos[0] == pytest.approx(0.3) and rhos[-1] == pytest.approx(0.0 if pacing == "linear" else 0.3 / (1 + kappa))


@pytest.mark.parametrize("entropy_min,entropy_max", [(-2.0, -6.6), (1.0, 1.0), (-2.0, float("nan"))])
def test_crossing_entropy_bounds_are_a_configuration_error(entropy_min, entropy_max):
    with pytest.raises(ConfigError, match=r"entropy_min=.*entropy_max="):
        EntropyPacer(PPLConfig(), entropy_min=entropy_min, entropy_max=entropy_max)


@pytest.mark.parametrize(
    "mode,cls,synthetic", [("off", RealDataMixer, False), ("naive", NaiveMixer, True), ("ppl", PPLMixer, True)]
)
def test_the_mode_picks_the_mixer_once(mode, cls, synthetic):
    assert mixer_class(PPLConfig(mode=mode)) is cls and cls.uses_synthetic is synthetic


def mix(cfg, demo, online, pos, neg, critic, entropy_min, interventions=None):
    """A mixer as the learner builds one: by the factory, synthetic pools attached once they exist."""
    mixer = make_mixer(cfg, demo, online, interventions, critic=critic, entropy_min=entropy_min)
    if pos is not None or neg is not None:
        mixer.attach_synthetic(pos, neg)
    return mixer


class FakeCritic:
    """Q = proprio[1] (the episode's seed, see helpers), entropy scripted."""

    def __init__(self, entropies):
        self.entropies = list(entropies)

    def q_values(self, batch):
        return batch["obs/proprio"][:, 1].astype(np.float64) / 10.0

    def entropy(self, batch):
        return self.entropies.pop(0) if len(self.entropies) > 1 else self.entropies[0]


def stores(tmp_path):
    store = new_store(tmp_path, group="demo")
    for g in ("real", "synthetic"):
        store.ensure_group(g, store.schema("demo"))
    with store.writer("demo") as w:
        w.append_episode(make_episode(3, 40))  # Q 0.3
    with store.writer("real") as w:
        w.append_episode(make_episode(3, 40))  # Q 0.3
    with store.writer("synthetic") as w:
        w.append_episode({**make_episode(5, 40), "success": np.ones(40, bool)}, wm_version=1)  # success pool, Q 0.5
        w.append_episode(make_episode(0, 40), wm_version=1)  # failure pool, Q 0.0
    syn = store.reader("synthetic")
    return (
        GroupSampler(store.reader("demo")),
        GroupSampler(store.reader("real")),
        GroupSampler(syn, where=lambda r: r.success),
        GroupSampler(syn, where=lambda r: not r.success),
    )


def test_the_mixer_bounds_come_from_the_action_space_and_the_config(tmp_path):
    demo, online, pos, neg = stores(tmp_path)
    critic = FakeCritic([0.0])
    # default upper bound |A| ln 2 (the uniform distribution on the squashed box), lower the target entropy
    m = make_mixer(PPLConfig(), demo, online, critic=critic, entropy_min=-2.0, action_dim=4)
    assert (m.pacer.entropy_min, m.pacer.entropy_max) == (-2.0, pytest.approx(4 * np.log(2)))
    m = make_mixer(PPLConfig(entropy_min=-1.0, entropy_max=3.0), demo, online, critic=critic, entropy_min=-2.0,
                   action_dim=4)
    assert (m.pacer.entropy_min, m.pacer.entropy_max) == (-1.0, 3.0)
    # a target entropy above what a 1-D squashed policy can reach (ln 2): the bounds cross
    with pytest.raises(ConfigError, match="entropy_min=1.0"):
        make_mixer(PPLConfig(), demo, online, critic=critic, entropy_min=1.0, action_dim=1)
    with pytest.raises(ValueError, match="entropy_max"):
        make_mixer(PPLConfig(), demo, online, critic=critic, entropy_min=-2.0)
    with pytest.raises(ValueError, match=r"entropy_max \(-3.0\) must exceed ppl.entropy_min \(-2.0\)"):
        PPLConfig(entropy_min=-2.0, entropy_max=-3.0)


def test_ppl_batch_composition(tmp_path):
    demo, online, pos, neg = stores(tmp_path)
    # default hyperbolic pacing, bounds [-2, 2]: the entropy drops from 2 to -2 at once, EMA 0.5
    cfg = PPLConfig(entropy_ema=0.5, q_probe_every=1, entropy_max=2.0)
    mixer = mix(cfg, demo, online, pos, neg, FakeCritic([2.0, -2.0]), -2.0)
    rng = np.random.default_rng(0)
    b = mixer.sample(rng, 100)
    # first call: H = H_max, H~ = 1 -> rho = 0.3 / (1 + 4) = 0.06: a maximally unsure policy still gets some
    assert mixer.last["ppl/rho"] == pytest.approx(0.06) and mixer.last["ppl/entropy_h0"] == 2.0
    assert mixer.last["batch/synthetic_pos"] + mixer.last["batch/synthetic_neg"] == 6
    b = mixer.sample(rng, 100)
    m = mixer.last
    assert m["ppl/entropy"] == 0.0 and m["ppl/entropy_norm"] == pytest.approx(0.5)
    assert m["ppl/rho"] == pytest.approx(0.1)  # H~ = 0.5: 0.3 / (1 + 4 * 0.5)
    # lambda* = (0.3 - 0.0) / (0.5 - 0.0) = 0.6 of the 10 synthetic samples from the success pool
    assert m["ppl/lambda"] == pytest.approx(0.6)
    assert (m["batch/synthetic_pos"], m["batch/synthetic_neg"]) == (6, 4)
    assert (m["batch/demo"], m["batch/online"]) == (45, 45)  # the real part keeps its 50/50 split
    assert b["action"].shape == (100, 2) and b["weights"].shape == (100,)
    # synthetic mean Q = (6 * 0.5 + 4 * 0) / 10 = 0.3 = real mean: no sample is zeroed
    assert m["batch/zero_weight"] == 0 and (b["weights"] == 1).all()
    assert m["batch/synthetic_share"] == pytest.approx(0.1)


def test_ppl_zeroes_synthetic_samples_when_only_the_optimistic_pool_exists(tmp_path):
    demo, online, pos, _ = stores(tmp_path)
    cfg = PPLConfig(entropy_ema=0.0, q_probe_every=1, delta_q=0.05, entropy_max=2.0)
    mixer = mix(cfg, demo, online, pos, None, FakeCritic([2.0, -2.0]), -2.0)
    rng = np.random.default_rng(1)
    mixer.sample(rng, 100)
    b = mixer.sample(rng, 100)  # rho 0.3: 30 synthetic, all from the success pool (Q 0.5 > 0.3)
    syn = b["source"] == "synthetic_pos"
    assert syn.sum() == 30 and (b["weights"][syn] == 0).all() and (b["weights"][~syn] == 1).all()


def test_off_and_naive_modes(tmp_path):
    demo, online, pos, neg = stores(tmp_path)
    off = mix(PPLConfig(mode="off"), demo, online, pos, neg, None, -2.0)
    b = off.sample(np.random.default_rng(0), 64)
    assert set(b["source"]) == {"demo", "online"}
    naive = mix(PPLConfig(mode="naive", naive_share=0.25), demo, online, pos, neg, None, -2.0)
    b = naive.sample(np.random.default_rng(0), 64)
    assert (np.char.startswith(b["source"].astype(str), "synthetic")).sum() == 16 and (b["weights"] == 1).all()


def test_intervention_steps_join_the_demo_half_by_size(tmp_path):
    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        w.append_episode(make_episode(3, 31))  # 30 transitions (the truncated last step is never sampled)
    took_over = np.zeros(41, bool)
    took_over[:10] = True  # a human drove the first 10 steps
    with store.writer("real") as w:
        w.append_episode({**make_episode(7, 41), "intervention": took_over})
    real = store.reader("real")
    interventions = GroupSampler(real, step_key="intervention")
    assert interventions.num_transitions == 10
    b = interventions.transitions(np.random.default_rng(0), 50)
    assert b["intervention"].all() and (b["index"] < 10).all()

    mixer = mix(PPLConfig(mode="off"), GroupSampler(store.reader("demo")), GroupSampler(real), None, None, None, -2.0,
                     interventions=interventions)
    b = mixer.sample(np.random.default_rng(0), 80)
    # demo half 40 split 30:10 by size; online keeps its 40 (which may include driven steps too)
    assert (mixer.last["batch/demo"], mixer.last["batch/intervention"], mixer.last["batch/online"]) == (30, 10, 40)
    assert b["intervention"][b["source"] == "intervention"].all()


def test_step_key_must_be_cached(tmp_path):
    store = new_store(tmp_path, group="demo")
    with pytest.raises(Exception, match="does not cache key"):
        GroupSampler(store.reader("demo"), step_key="nope")


def test_pacing_starts_when_the_actor_starts_learning(tmp_path):
    demo, online, pos, neg = stores(tmp_path)
    # during the critic warm-up the actor is the behaviour-cloned one: its entropy is not even asked for
    cfg = PPLConfig(entropy_ema=0.0, q_probe_every=1, entropy_max=1.0)
    mixer = mix(cfg, demo, online, pos, neg, FakeCritic([1.0, -0.5]), -2.0)
    rng = np.random.default_rng(0)
    for _ in range(2):
        mixer.sample(rng, 100, actor_learning=False)
        assert mixer.pacer.h0 is None and mixer.last["ppl/rho"] == 0.0  # no entropy yet, no synthetic data
    mixer.sample(rng, 100)  # released: H = 1.0 = H_max, H~ = 1 -> rho = 0.3 / 5
    assert mixer.pacer.h0 == 1.0 and mixer.last["ppl/rho"] == pytest.approx(0.06)
    mixer.sample(rng, 100)  # H = -0.5: H~ = (-0.5 + 2) / 3 = 0.5 -> rho = 0.3 / 3
    assert mixer.last["ppl/rho"] == pytest.approx(0.1)


def test_a_pool_that_fills_between_probes_is_probed_before_it_is_used(tmp_path):
    demo, online, pos, neg = stores(tmp_path)
    cfg = PPLConfig(entropy_ema=0.0, q_probe_every=1000, entropy_max=2.0)
    mixer = mix(cfg, demo, online, pos, neg, FakeCritic([2.0, -2.0]), -2.0)
    rng = np.random.default_rng(0)
    mixer.sample(rng, 100)  # first probe: H_0 = 2
    mixer.q_pos = float("nan")  # as if the success pool had been empty at that probe
    mixer.pacer.observe(-2.0)  # confident now: rho 0.3, synthetic samples wanted before the next scheduled probe
    b = mixer.sample(rng, 100)
    assert np.isfinite(mixer.last["ppl/lambda"]) and np.isfinite(mixer.q_pos)
    assert mixer.last["batch/synthetic_pos"] + mixer.last["batch/synthetic_neg"] == 30 and len(b["action"]) == 100


def test_added_synthetic_rows_leave_the_real_part_whole(tmp_path):
    """placement add: the synthetic rows come on top of a full real batch (the loss-weight form
    E_real + rho E_syn), where replace takes their places from the real part."""
    demo, online, pos, neg = stores(tmp_path)
    for placement, real_rows in (("replace", 48), ("add", 64)):
        naive = mix(PPLConfig(mode="naive", naive_share=0.25, placement=placement), demo, online, pos, neg, None, -2.0)
        b = naive.sample(np.random.default_rng(0), 64)
        syn = np.char.startswith(b["source"].astype(str), "synthetic")
        assert (syn.sum(), (~syn).sum()) == (16, real_rows)
        assert naive.last["batch/demo"] == naive.last["batch/online"] == real_rows // 2
        assert naive.last["batch/synthetic_share"] == pytest.approx(16 / (16 + real_rows))

