"""The bridge's Best-of-N search on the ONNX world model (robot_bridge/core/search.py): N = 1 is the
base policy, it chooses what the offline (torch) search chooses, it is reproducible under its seed,
its time budget holds (with a clock only imagined steps move, and with a real one), and what it
cannot run with is refused when it is set up, not in the middle of an episode."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from robot_bridge.core.search import Searcher, SearchError
from robot_bridge.core.search_source import SearchSource
from robot_bridge.errors import ProfileError
from robot_bridge.profile import SearchSpec, load_profile
from tests.bridge.helpers import small_profile
from tests.evaluation.helpers import STATE, policy_tensors, rigged_model
from worldsample.paths import RunFiles
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig, PolicyRegistry
from worldsample.world_model import checkpoint
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.model import WorldModel
from worldsample.world_model.onnx_model import OnnxWorldModel

ROOT = Path(__file__).resolve().parents[2]


def saved(tmp_path, **kw) -> OnnxWorldModel:
    return OnnxWorldModel(checkpoint.save(RunFiles.of(tmp_path).world_model, rigged_model(**kw)).parent)


def actor(a0=-0.3, stochastic=True, log_std=0.5, weights=0.0, seed=0):
    """The rigged policies (success needs a0 above ~0.35); `weights` makes the action depend on the state."""
    cfg, t = policy_tensors(a0, stochastic=stochastic, log_std=log_std)
    t["mean.weight"] = np.random.default_rng(seed).normal(0, weights, t["mean.weight"].shape).astype(np.float32)
    return NumpyActor(cfg.model_copy(update={"version": 3}), t)


def observations(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"state": rng.normal(0, 0.1, STATE).astype(np.float32)} for _ in range(n)]


def drive(searcher, obs_seq):
    searcher.reset()
    out = []
    for o in obs_seq:
        a = searcher.act(o)
        searcher.record(o, a)
        out.append(a)
    return np.stack(out)


def test_n1_executes_the_base_policy_action_by_action(tmp_path):
    base = actor(weights=2.0)
    obs = observations(8)
    s = Searcher(saved(tmp_path), base, n=1, horizon=4)
    got = drive(s, obs)
    want = np.stack([base.act(o) for o in obs])
    assert np.ptp(want, axis=0).max() > 0.1  # the base actions follow the observations
    np.testing.assert_array_equal(got, want)
    c = s.counts
    assert c.decisions == c.searched == c.chose_base == 8 and c.fallbacks == 0  # it did imagine, every tick


def test_it_chooses_what_the_offline_search_chooses(tmp_path):
    import torch

    from worldsample.evaluation.search import BestOfN

    torch.set_num_threads(1)
    base = actor(weights=0.5)
    obs = observations(10)
    offline = BestOfN(rigged_model(), base, n=8, horizon=3, seed=4)
    offline.reset(obs[0])
    want = np.stack([offline.act(o) for o in obs])
    s = Searcher(saved(tmp_path), base, n=8, horizon=3, seed=4)
    got = drive(s, obs)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert s.counts.chose_base == offline.stats.chose_base < 10
    assert (got[:, 0] > 0.35).mean() >= 0.5  # it executes the candidates the model predicts to succeed


def test_a_seeded_search_is_reproducible(tmp_path):
    wm = saved(tmp_path, kind="diffusion")  # stochastic: 4 imagined futures per candidate, noise from the seed
    base, obs = actor(), observations(8)
    first = Searcher(wm, base, n=6, horizon=3, seed=7)
    assert first.samples == 4
    got = drive(first, obs)
    again = Searcher(wm, base, n=6, horizon=3, seed=7)
    again.warm_up(obs[0])  # measuring the step time draws nothing from the search's random numbers
    np.testing.assert_array_equal(drive(again, obs), got)
    assert not np.array_equal(drive(Searcher(wm, base, n=6, horizon=3, seed=8), obs), got)


class StepClock:
    """A clock that only imagined steps move: `durations` seconds for the next calls, then `default`."""

    def __init__(self, wm, default=0.01, durations=()):
        self.now, self.default, self.durations = 0.0, default, list(durations)
        step = wm.step

        def timed_step(*args, **kwargs):
            self.now += self.durations.pop(0) if self.durations else self.default
            return step(*args, **kwargs)

        wm.step = timed_step

    def __call__(self):
        return self.now


@pytest.mark.parametrize("budget", [0.012, 0.035, 0.06, 10.0])
def test_the_time_budget_is_never_exceeded(tmp_path, budget):
    wm, base, obs = saved(tmp_path), actor(), observations(5)
    s = Searcher(wm, base, n=4, horizon=5, budget_s=budget, clock=StepClock(wm))
    s.warm_up(obs[0])  # as the bridge does when a policy comes in: it measures 10 ms per step
    got = drive(s, obs)
    c = s.counts
    assert c.decisions == 5 and c.overruns == 0 and c.max_decision_ms <= budget * 1e3
    if budget < 0.05:  # five imagined steps of 10 ms (plus the margin on the next one) cannot fit
        assert c.fallbacks == 5 and c.searched == 0
        np.testing.assert_array_equal(got, np.stack([base.act(o) for o in obs]))
    else:
        assert c.fallbacks == 0 and c.searched == 5
        assert c.max_decision_ms > 35  # it did imagine: the clock moved


def test_slower_steps_overrun_by_at_most_one_step_then_the_estimate_follows(tmp_path):
    wm, base, obs = saved(tmp_path), actor(), observations(12)
    clock = StepClock(wm)
    s = Searcher(wm, base, n=4, horizon=5, budget_s=0.06, clock=clock)
    s.warm_up(obs[0])
    clock.durations = [0.01, 0.01, 0.01, 0.01, 0.04]  # the first tick's last step: 40 ms instead of 10
    s.reset()
    for o in obs[:2]:
        s.record(o, s.act(o))
    c = s.counts
    assert c.overruns == 1 and c.max_decision_ms == pytest.approx(80.0)  # 60 ms budget + at most that one step
    assert c.searched == 2  # one stalled step does not stop the search: the next tick searched again
    clock.default = 0.04  # from now on every step takes 40 ms: five cannot fit in 60
    for o in obs[2:]:
        s.record(o, s.act(o))
    assert c.searched == 2 and c.fallbacks == 10
    assert c.max_decision_ms <= 60 + 40 + 1e-6  # never over the budget by more than one step
    assert s.estimate_s() == pytest.approx(0.06)  # 1.5 x 40 ms: the slow steps are the estimate now
    before = c.overruns
    for o in obs[:3]:
        s.record(o, s.act(o))
    assert c.overruns == before  # they stop before the step that would not fit


def test_a_real_clock_budget_too_small_falls_back_every_tick(tmp_path):
    base, obs = actor(), observations(4)
    s = Searcher(saved(tmp_path), base, n=4, horizon=5, budget_s=1e-6)
    s.warm_up(obs[0])
    got = drive(s, obs)
    np.testing.assert_array_equal(got, np.stack([base.act(o) for o in obs]))
    assert s.counts.fallbacks == s.counts.decisions == s.counts.overruns == 4 and s.counts.searched == 0


def test_policies_it_cannot_imagine_with_are_refused(tmp_path):
    wm = saved(tmp_path)
    with pytest.raises(SearchError, match="deterministic: set episode.search.spread"):
        Searcher(wm, actor(stochastic=False), n=4, horizon=3)
    spread = Searcher(wm, actor(stochastic=False), n=4, horizon=3, spread=0.3)
    assert drive(spread, observations(2)).shape == (2, 4)
    Searcher(wm, actor(stochastic=False), n=1, horizon=3)  # N = 1 needs no candidates
    cfg = PolicyConfig(obs=[ObsInput(key="proprio", dim=4)], action_dim=4, hidden=[], action_low=[-1] * 4,
                       action_high=[1] * 4)
    other = NumpyActor(cfg, {"mean.weight": np.zeros((4, 4), np.float32), "mean.bias": np.zeros(4, np.float32)})
    with pytest.raises(SearchError, match=r"reads proprio of size 4; world model v1 predicts \{'state': 39\}"):
        Searcher(wm, other, n=1, horizon=3)
    with pytest.raises(SearchError, match="pixel policy"):
        Searcher(wm, SimpleNamespace(version=5), n=1, horizon=3)


# -- set-up in the bridge (SearchSource) ------------------------------------------------------------

def profile(tmp_path, **changes):
    return load_profile(small_profile(tmp_path, **changes))


def source(tmp_path, run, **spec):
    p = profile(tmp_path)
    return SearchSource(SearchSpec(**({"n": 4, "horizon": 3, "budget_ms": 20} | spec)), run, p.obs_specs(),
                        p.action.dim, p.episode.group)


def test_start_up_refuses_a_run_without_a_usable_world_model(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(SearchError, match="holds no world model: train one first"):
        source(tmp_path, run)
    vdir = checkpoint.save(RunFiles.of(run).world_model, rigged_model()).parent
    (vdir / "model.onnx").unlink()
    with pytest.raises(SearchError, match="world model v1: .*model.onnx is missing"):
        source(tmp_path, run)
    other = tmp_path / "other"  # a world model of another robot: proprio of 7 and no `state`
    cfg = WorldModelConfig.model_validate(rigged_model().cfg.model_dump() | {"vector_keys": {"proprio": 7}})
    checkpoint.save(RunFiles.of(other).world_model, WorldModel(cfg).eval())
    with pytest.raises(SearchError, match=r"reads proprio of shape \(7,\); the robot has \(4,\)"):
        source(tmp_path, other)


def test_it_follows_new_world_models_and_keeps_a_working_one(tmp_path):
    run = tmp_path / "run"
    wm_dir = RunFiles.of(run).world_model
    checkpoint.save(wm_dir, rigged_model())
    src = source(tmp_path, run)
    base = actor()
    src.refresh(base)
    assert src.active and src.searcher.counts.decisions == 0  # warmed up, nothing counted
    v2 = checkpoint.save(wm_dir, rigged_model(seed=1)).parent
    (v2 / "encode.onnx").write_bytes(b"broken")
    src.refresh(base)
    assert src.wm.version == 1 and "v2" in src.wm_error and src.active
    checkpoint.save(wm_dir, rigged_model(seed=2))
    src.refresh(base)
    assert src.wm.version == 3 and src.wm_error is None and src.searcher.wm is src.wm
    src.begin()
    for o in observations(3):
        src.record(o, src.act(o))
    meta = src.end()
    assert meta["decisions"] == 3 and meta["searched"] == 3 and meta["world_model_version"] == 3 and meta["active"]
    assert src.status()["decisions"] == 3
    src.refresh(actor(stochastic=False))  # a deterministic policy without spread: it runs without search
    assert not src.active and "deterministic" in src.error and src.status()["error"] == src.error


def test_the_profile_keeps_the_budget_below_the_control_period(tmp_path):
    assert profile(tmp_path).episode.search is None  # off by default
    p = profile(tmp_path, **{"episode.search": {"n": 4, "horizon": 3, "budget_ms": 20}})
    assert p.episode.search.n == 4 and p.episode.search.samples is None
    with pytest.raises(ProfileError, match=r"budget_ms \(50\) must be below the control period \(50 ms at 20 Hz\)"):
        profile(tmp_path, **{"episode.search": {"budget_ms": 50}})
    with pytest.raises(ProfileError, match="exclude each other"):
        profile(tmp_path, **{"episode.search": {"budget_ms": 20}, "episode.explore": True})


def test_the_search_runs_without_torch(tmp_path):
    run = tmp_path / "run"
    checkpoint.save(RunFiles.of(run).world_model, rigged_model())
    PolicyRegistry(run).publish(*policy_tensors(-0.3, stochastic=True, log_std=0.5))
    prof = small_profile(tmp_path, **{"episode.search": {"n": 4, "horizon": 3, "budget_ms": 20}})
    code = (
        "import sys, numpy as np\n"
        "from robot_bridge.core.search_source import SearchSource\n"
        "from robot_bridge.profile import load_profile\n"
        "from worldsample.policy import load_actor\n"
        f"p = load_profile({str(prof)!r})\n"
        f"src = SearchSource(p.episode.search, {str(run)!r}, p.obs_specs(), p.action.dim)\n"
        f"src.refresh(load_actor({str(run)!r})); src.begin()\n"
        "obs = {'state': np.zeros(39, np.float32)}\n"
        "a = src.act(obs); assert a.shape == (4,) and src.searcher.counts.searched == 1\n"
        "heavy = [m for m in ('torch', 'ray') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
