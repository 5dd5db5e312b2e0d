from pathlib import Path

import pytest

from worldsample.config import load_config
from worldsample.errors import ConfigError


def test_defaults_yaml_and_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("env:\n  image_size: 96\n  cameras: [corner]\ndemos:\n  episodes: 3\n")
    cfg = load_config(f, ["demos.episodes=7", "env.domain=sim", "demos.expert.action_noise_std=0.1"])
    assert cfg.env.image_size == 96 and cfg.demos.episodes == 7 and cfg.env.domain == "sim"
    assert cfg.demos.expert.action_noise_std == 0.1
    assert load_config().store.chunk_len == 32


@pytest.mark.parametrize(
    "override,field",
    [
        ("demos.episodes=0", "demos.episodes"),
        ("env.domain=moon", "env.domain"),
        ("store.chunk_len=abc", "store.chunk_len"),
        ("env.bogus=1", "env.bogus"),
    ],
)
def test_invalid_values_name_the_field(override, field):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert field in str(e.value)


def test_encoder_pretraining_groups_are_checked():
    image = Path(__file__).resolve().parents[1] / "configs" / "bench" / "image.yaml"
    with pytest.raises(ConfigError, match="demos.sim_episodes is 0"):
        load_config(image, ["loop.vision.pretrain_groups=[demo,sim]"])
    with pytest.raises(ConfigError, match="named twice"):
        load_config(image, ["loop.vision.pretrain_groups=[demo,demo]"])
    with pytest.raises(ConfigError, match="pretrain_groups"):
        load_config(image, ["loop.vision.pretrain_groups=[real]"])
    cfg = load_config(image, ["loop.vision.pretrain_groups=[demo,sim]", "demos.sim_episodes=4"])
    assert cfg.loop.vision.pretrain_groups == ["demo", "sim"] and cfg.demos.sim_episodes == 4


def test_bad_files_and_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(bad)
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(None, ["demos.episodes"])
    with pytest.raises(ConfigError, match="not a section"):
        load_config(None, ["demos.episodes=3", "demos.episodes.x=1"])


def test_yaml_1_1_words_stay_strings(tmp_path):
    cfg = load_config(None, ["loop.ppl.mode=off", "loop.explore=false"])
    assert cfg.loop.ppl.mode == "off" and cfg.loop.explore is False
    f = tmp_path / "c.yaml"
    f.write_text("loop:\n  ppl:\n    mode: off\n  interventions: true\n")
    cfg = load_config(f)
    assert cfg.loop.ppl.mode == "off" and cfg.loop.interventions is True


def test_a_run_config_with_the_old_synthetic_bound_still_loads(tmp_path):
    # one bound for the synthetic pool: loop.synth.pool_max_steps; older run directories named a second
    f = tmp_path / "config.yaml"
    f.write_text("store:\n  chunk_len: 16\n  synthetic_max_steps: 200000\n")
    cfg = load_config(f)
    assert cfg.store.chunk_len == 16 and not hasattr(cfg.store, "synthetic_max_steps")
    assert cfg.loop.synth.pool_max_steps == 5000


def test_the_loops_uncertainty_veto_is_on_by_default_with_two_members():
    """Issue 17, item 4: the veto is on by default, and it needs a disagreement to cut on: the loop's
    world model has two dynamics members unless a config says otherwise (with one, every branch is
    written unvetted and counted as such)."""
    for path in (None, "configs/default.yaml", "configs/bench/state.yaml", "configs/bench/image.yaml"):
        cfg = load_config(Path(__file__).resolve().parents[1] / path if path else None, [])
        assert cfg.loop.synth.max_uncertainty == "calibrated", path
        assert cfg.loop.world_model.dynamics.ensemble >= 2, path
