"""The tiny image-profile run that test_vision_synthesis.py and test_vision_reward.py share."""

import numpy as np
import pytest

from worldsample.loop.loop import Loop, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.store import EpisodeStore

from .test_vision_synthesis import CLASSIFIER, _config


@pytest.fixture(scope="session")
def ppl_run(tmp_path_factory):
    """A tiny image-profile run in ppl mode with the classifier's reward: demos, then the loop with
    the real parts (no Ray); every batch the mixer hands the learner is kept."""
    from worldsample.demos import collect_demos

    run = tmp_path_factory.mktemp("image_ppl_run")
    cfg = _config("loop.ppl.mode=ppl", *CLASSIFIER, "loop.real_steps=100")  # two real episodes: a continual round
    collect_demos(run, cfg, cfg.demos.episodes)
    parts = build_parts(run, cfg, EpisodeStore(run))
    learning = parts.learner.obj
    batches = []
    sample = learning.mixer.sample

    def recording(*a, **kw):
        batch = sample(*a, **kw)
        batches.append({k: np.array(v, copy=True) for k, v in batch.items()})
        return batch

    learning.mixer.sample = recording
    rows = []
    summary = Loop(run, cfg.loop, parts, schedule_for(cfg.loop), on_round=lambda r: rows.append(dict(r))).run()
    return run, cfg, learning, batches, rows, summary
