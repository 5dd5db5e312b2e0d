"""The learner's critic read back from a trainer checkpoint without RLlib gives RLlib's Q-values
(twin: the minimum, ensemble: the mean); a run without a trainer checkpoint gets a clear error,
from the library and from `worldsample eval search --score value`."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from services.cli.main import app
from tests.evaluation.helpers import ACTIONS, STATE, make_run
from worldsample.errors import ConfigError
from worldsample.evaluation.critic import load_critic
from worldsample.learner.config import LearnerConfig
from worldsample.loop.checkpoint import save_checkpoint
from worldsample.paths import RunFiles


def sac_agent(critics: int, obs_dim: int, layer_norm: bool = True, critic: str = "rllib"):
    from worldsample.learner import sac

    torch.manual_seed(critics)
    cfg = LearnerConfig(obs_keys=["state"], hidden=[16, 16], batch_size=8, critics=critics, layer_norm=layer_norm,
                        critic=critic, critic_warmup_updates=0, bc_pretrain_steps=0)
    return sac.SACAgent(cfg, obs_dim, gym.spaces.Box(-1, 1, (ACTIONS,), np.float32))


def save_learner(run, agent, updates: int = 7) -> None:
    """The learner part as the loop saves it (worldsample/loop/learning.py `state`)."""
    part = {"learner": agent.group.get_state(), "mixer": {}, "updates": updates, "rng": {"state": 1}}
    save_checkpoint(RunFiles.of(run).trainer, {"learner": part}, {"round": 3, "real_steps": 120, "real_episodes": 4})


@pytest.mark.parametrize("critics,layer_norm,network", [
    (2, True, "rllib"), (3, True, "rllib"), (2, False, "rllib"), (2, True, "mlp"), (3, True, "mlp"), (2, False, "mlp")])
def test_the_critic_gives_rllibs_q_values(tmp_path, critics, layer_norm, network):
    agent = sac_agent(critics, 5, layer_norm, network)
    try:
        rng = np.random.default_rng(0)
        obs = rng.normal(0, 1, (32, 5)).astype(np.float32)
        acts = rng.uniform(-1, 1, (32, ACTIONS)).astype(np.float32)
        want = agent.q_values({"obs/state": obs, "action": acts})
        save_learner(tmp_path, agent)
    finally:
        agent.close()
    critic = load_critic(tmp_path)
    assert len(critic.nets) == critics and critic.aggregate == ("min" if critics == 2 else "mean")
    assert critic.source["checkpoint"] == 1 and critic.source["updates"] == 7 and critic.source["real_steps"] == 120
    assert critic.gamma == 0.97 and critic.reward == "success" and critic.obs_keys == ["state"]
    got = critic.q({"state": obs}, acts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    each = critic.q_each({"state": obs}, acts)
    assert each.shape == (critics, 32) and not np.allclose(each[0], each[1])  # the critics differ: min/mean matter


def test_no_trainer_checkpoint_is_a_clear_error(tmp_path):
    make_run(tmp_path, stochastic=True)
    with pytest.raises(ConfigError, match="no trainer checkpoint") as e:
        load_critic(tmp_path)
    assert "--score success" in str(e.value)


def test_eval_search_by_value(run):
    res = CliRunner().invoke(app, ["eval", "search", str(run), "--n", "2", "--horizon", "2", "--episodes", "1",
                                   "--score", "value"])
    assert res.exit_code == 2 and "no trainer checkpoint" in res.output
    assert not (run / "reports").exists()  # refused before any search
    agent = sac_agent(2, STATE)
    try:
        save_learner(run, agent)
    finally:
        agent.close()
    res = CliRunner().invoke(app, ["eval", "search", str(run), "--n", "4", "--horizon", "2", "--episodes", "1",
                                   "--score", "value"])
    assert res.exit_code == 0, res.output
    (path,) = (run / "reports").glob("best_of_n_*.json")
    report = json.loads(path.read_text())
    assert report["score"] == "value" and report["critic"]["checkpoint"] == 1 and report["critic"]["critics"] == 2
    assert report["decisions"]["decisions"] == 4 and report["decisions"]["mean_best_score"] is not None
    assert [r["policy"] for r in report["policies"]] == ["v4", "v4 best-of-4 (value)"]
    res = CliRunner().invoke(app, ["eval", "search", str(run), "--n", "4", "--horizon", "2", "--episodes", "1",
                                   "--score", "critic"])
    assert res.exit_code == 0, res.output
    newest = max((run / "reports").glob("best_of_n_*.json"), key=lambda p: p.stat().st_mtime_ns)
    report = json.loads(newest.read_text())
    assert report["score"] == "critic" and report["policies"][1]["policy"] == "v4 best-of-4 (critic)"
    bad = CliRunner().invoke(app, ["eval", "search", str(run), "--score", "reward"])
    assert bad.exit_code == 2 and "success, value or critic" in bad.output
