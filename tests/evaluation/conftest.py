"""Fixtures of the evaluation tests: a run whose world model has hand-set heads (helpers.make_run),
with a config saved the way `worldsample train` saves it, for the `worldsample eval` commands."""

import pytest
import torch

from tests.evaluation.helpers import make_run
from worldsample.atomic import atomic_write_text
from worldsample.config import dump_config, load_config
from worldsample.paths import RunFiles


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the suite shares two cores


@pytest.fixture
def run(tmp_path):
    make_run(tmp_path, a0s=(-0.8, 0.1, 0.6, 0.9), stochastic=True)
    cfg = load_config(None, ["env.max_episode_steps=4", "env.cameras=[]"])
    atomic_write_text(RunFiles.of(tmp_path).config, dump_config(cfg))
    return tmp_path
