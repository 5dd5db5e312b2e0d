"""The image profile (loop.vision) end to end in one process: real demos rendered at 32 px, the
encoder pretrained on them and frozen, the real SAC learner on [latent, proprio], every exported
version published as policy.onnx that the collector and evaluator run with onnxruntime. What is
checked: the task state never reaches the learner, the encoder is loaded (not retrained) on resume,
and configs that would let the state in are refused."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from worldsample.config import load_config
from worldsample.errors import ConfigError
from worldsample.loop.config import LoopConfig
from worldsample.loop.loop import Loop, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.store import EpisodeStore, GroupSampler

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "configs" / "bench" / "image.yaml"
TINY = [
    "env.cameras=[corner4]",
    "env.image_size=32",
    "env.max_episode_steps=25",
    "demos.episodes=2",
    "loop.real_steps=50",
    "loop.interventions=false",
    "loop.eval_episodes=1",
    "loop.eval_every_episodes=5",
    "loop.tensorboard=false",
    "loop.min_real_for_learning=32",
    "loop.learner.hidden=[16,16]",
    "loop.learner.batch_size=16",
    "loop.learner.bc_pretrain_steps=5",
    "loop.learner.critic_warmup_updates=2",
    "loop.vision.cameras=[corner4]",
    "loop.vision.latent_dim=8",
    "loop.vision.pretrain_steps=3",
    "loop.vision.pretrain_batch=8",
    "loop.vision.channels=[8,8]",
    "loop.vision.strides=[2,2]",
]


def _config(*extra):
    return load_config(IMAGE, [*TINY, *extra])


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    """A tiny image-profile run: demos, then the loop with the real parts (no Ray)."""
    from worldsample.demos import collect_demos

    run = tmp_path_factory.mktemp("image_run")
    cfg = _config()
    collect_demos(run, cfg, cfg.demos.episodes)
    store = EpisodeStore(run)
    parts = build_parts(run, cfg, store)
    learning = parts.learner.obj
    seen = []  # every batch the mixer hands the learner
    sample = learning.mixer.sample

    def recording(*a, **kw):
        batch = sample(*a, **kw)
        seen.append(sorted(batch))
        return batch

    learning.mixer.sample = recording
    summary = Loop(run, cfg.loop, parts, schedule_for(cfg.loop)).run()
    return run, cfg, learning, seen, summary


def test_the_image_profile_trains_and_exports_onnx_versions(image_run):
    from worldsample.policy import PolicyRegistry
    from worldsample.policy.onnx_actor import ONNX_FILE, OnnxActor
    from worldsample.sim import make_env

    run, cfg, learning, seen, summary = image_run
    assert summary.real_steps >= cfg.loop.real_steps and summary.updates > 0
    assert (run / "vision" / "encoder" / "encoder.json").is_file()
    reg = PolicyRegistry(run)
    latest = reg.latest_version()
    assert latest is not None and latest >= 2  # the BC warm start and at least the final export
    vdir = reg.dir.path(latest)
    config, _ = reg.load(latest)
    assert [o.key for o in config.obs] == ["latent", "proprio"]
    actor = OnnxActor(vdir / ONNX_FILE, config=config)
    env = make_env(cfg.env)
    obs, _ = env.reset(seed=3)
    actor.check_obs({k: v.shape for k, v in env.observation_space.spaces.items()})
    action = actor.act(obs)
    assert action.shape == (4,) and np.isfinite(action).all() and env.action_space.contains(action)
    env.close()
    # the collector and the evaluator ran the exported ONNX policies
    records = EpisodeStore(run).reader("real", cache=False).episode_records()
    assert any(r.policy_version is not None for r in records)
    assert summary.evals and summary.evals[-1][2] == latest


def test_the_task_state_never_reaches_the_learner(image_run):
    run, cfg, learning, seen, _ = image_run
    assert learning.keys == ["latent", "proprio"]
    assert learning.demo.obs_keys == ["latent", "proprio"] == learning.online.obs_keys
    for reader in (learning.demo.reader, learning.online.reader):
        assert "state" not in reader.cache.data and "latent" in reader.cache.data
        assert not any(k.startswith("image_") for k in reader.cache.data)  # frames are encoded, not cached
    assert seen, "the learner got no batch"
    for keys in seen:
        assert {"obs/latent", "next_obs/latent", "obs/proprio"} <= set(keys)
        assert not any("state" in k or "image_" in k for k in keys), keys
    # the stored state was recorded (for analysis) all the same
    assert "state" in EpisodeStore(run).schema("real").keys


def test_changing_the_stored_state_does_not_change_the_learners_input(image_run, tmp_path):
    """Two demo groups identical but for `state`: the learner's readers give identical batches."""
    from worldsample.loop.vision import LatentReader
    from worldsample.vision import load_encoder

    run, cfg, learning, _, _ = image_run
    encoder = load_encoder(run / "vision" / "encoder")
    src = EpisodeStore(run).reader("demo", cache=False)
    schema = EpisodeStore(run).schema("demo")
    batches = []
    for i, scramble in enumerate((False, True)):
        store = EpisodeStore(tmp_path / f"copy{i}", create=True)
        store.ensure_group("demo", schema)
        rng = np.random.default_rng(7)
        with store.writer("demo") as w:
            for e in range(src.num_episodes):
                ep = src.episode(e)
                if scramble:
                    ep["state"] = rng.normal(size=ep["state"].shape).astype(np.float32) * 100
                w.append_episode({k: v for k, v in ep.items()})
        reader = LatentReader(store, "demo", encoder, learning.keys)
        sampler = GroupSampler(reader, obs_keys=learning.keys, reward_key="success")
        batches.append(sampler.nstep(np.random.default_rng(0), 64, 1, 0.97))
        if scramble:
            assert not np.array_equal(store.reader("demo").cache.view("state"),
                                      EpisodeStore(tmp_path / "copy0").reader("demo").cache.view("state"))
    a, b = batches
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_on_resume_the_encoder_is_loaded_not_retrained(image_run, tmp_path):
    from worldsample.loop.vision import encoder_dir, ensure_encoder

    run, cfg, _, _, _ = image_run
    copy = tmp_path / "run"
    shutil.copytree(encoder_dir(run), encoder_dir(copy))
    before = (encoder_dir(copy) / "encoder.safetensors").read_bytes()
    _, metrics = ensure_encoder(copy, cfg.loop)  # no demos in `copy`: pretraining would fail
    assert metrics == {} and (encoder_dir(copy) / "encoder.safetensors").read_bytes() == before
    other = cfg.loop.model_copy(update={"vision": cfg.loop.vision.model_copy(update={"latent_dim": 9})})
    with pytest.raises(Exception, match="frozen for the run's life"):
        ensure_encoder(copy, other)


def test_the_encoder_pretrains_on_the_sim_group_when_asked(image_run, tmp_path):
    """loop.vision.pretrain_groups=[demo, sim]: the randomised-domain expert episodes join the demos in
    pretraining (frames counted); without them in the store the error names how to collect them."""
    from services.cli.demos_cmd import sim_config
    from worldsample.demos import SIM_SEED_OFFSET, collect_demos
    from worldsample.loop.vision import ensure_encoder

    run, _, _, _, _ = image_run
    cfg = _config("demos.sim_episodes=1", "loop.vision.pretrain_groups=[demo,sim]")
    copy = tmp_path / "run"
    shutil.copytree(run / "store", copy / "store")
    with pytest.raises(Exception, match="'sim' is not in"):
        ensure_encoder(copy, cfg.loop)
    collect_demos(copy, sim_config(cfg), 1)
    store = EpisodeStore(copy)
    demo_steps, sim = store.reader("demo").num_steps, store.reader("sim")
    assert sim.records[0].extra["seed"] == cfg.demos.seed + SIM_SEED_OFFSET  # not a demo's start
    _, metrics = ensure_encoder(copy, cfg.loop)
    assert metrics["vision/pretrain_samples"] == demo_steps + sim.num_steps
    only_demos = tmp_path / "demos_only"
    shutil.copytree(copy / "store", only_demos / "store")
    _, metrics = ensure_encoder(only_demos, _config().loop)
    assert metrics["vision/pretrain_samples"] == demo_steps


@pytest.mark.parametrize(
    "override, message",
    [
        ("loop.learner.obs_keys=[latent,state]", "include the task state"),
        ("loop.learner.obs_keys=[state,proprio]", "include the task state"),
        ("loop.learner.obs_keys=[proprio]", "lack 'latent'"),
        ("loop.world_model.image_keys=[image_corner4]", "name cameras"),
        ("loop.vision.cameras=[topview]", "lack \\['topview'\\]"),
    ],
)
def test_configs_that_let_the_state_in_or_miss_the_encoder_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        _config(override)


def test_latent_without_vision_is_refused_and_the_state_profile_is_unchanged():
    with pytest.raises(ValueError, match="only loop.vision.enabled"):
        LoopConfig(learner={"obs_keys": ["latent", "proprio"]})
    state = load_config(ROOT / "configs" / "bench" / "state.yaml")
    assert state.loop.learner.obs_keys == ["state"] and not state.loop.vision.enabled
    assert json.loads(state.loop.model_dump_json())["vision"]["enabled"] is False
