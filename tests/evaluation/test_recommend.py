"""The recommended policy: chosen from imagined scores among versions that exist, kept by the
tracker as exports and world models appear, and followed by the bridge's policy source."""

import json
import subprocess
import sys

import numpy as np
import pytest

from robot_bridge.core.policy_source import PolicySource
from tests.evaluation.helpers import make_run, policy_tensors, rigged_model
from worldsample.errors import ConfigError
from worldsample.evaluation.recommend import read_recommended, recommend, write_recommended
from worldsample.evaluation.tracker import RecommendationTracker
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry
from worldsample.world_model import checkpoint


def test_recommend_prefers_the_score_then_the_newer_version():
    assert recommend({1: (0.5, 0.2, 1.0), 2: (0.5, 0.3, 0.0), 3: (0.1, 0.9, 9.0)}, [1, 2, 3]) == 2
    assert recommend({1: (0.5, 0.3, 1.0), 4: (0.5, 0.3, 1.0)}, [1, 2, 3, 4]) == 4  # full tie: the newer
    assert recommend({1: (0.2,), 7: (0.9,)}, [1, 2, 3]) == 1  # v7 is not in the registry
    with pytest.raises(ConfigError, match="none of the scored"):
        recommend({7: (0.9,)}, [1, 2])


def test_the_tracker_keeps_the_pointer_on_the_best_scored_version(tmp_path):
    run = make_run(tmp_path, a0s=(-0.8, 0.6, 0.1, 0.9))
    tracker = RecommendationTracker(run, starts="heldout", n_starts=2, horizon=3)
    assert tracker.on_export(1)["recommend/version"] == 1.0 and read_recommended(run) == 1  # the only one
    assert tracker.on_export(2)["recommend/version"] == 2.0  # succeeds in imagination
    assert tracker.on_export(3)["recommend/version"] == 2.0  # fails: the pointer stays
    doc = json.loads((RunFiles.of(run).reports / "recommended.json").read_text())
    assert doc["recommended"] == "v2" and doc["world_model"] == "v1" and doc["scored"] == 3
    # a newer world model that prefers the opposite: the best ones are scored again in it before v4
    checkpoint.save(RunFiles.of(run).world_model, rigged_model(gain=-10.0, seed=1))
    row = tracker.on_export(4)
    assert tracker.wm_version == 2 and set(tracker.scores) == {1, 2, 3, 4}
    assert read_recommended(run) == 1 and row["recommend/version"] == 1.0  # a0 = -0.8 wins in the new model
    assert tracker.scores[4].success_rate == 0.0 and tracker.scores[1].wm_version == 2
    scores = json.loads((RunFiles.of(run).reports / "imagined_scores.json").read_text())
    assert scores["world_model"] == "v2" and len(scores["policies"]) == 4


def test_the_tracker_waits_for_a_world_model_and_survives_a_broken_policy(tmp_path):
    run = make_run(tmp_path)
    (RunFiles.of(run).world_model / "latest").unlink()  # as before the first world-model round
    tracker = RecommendationTracker(run, starts="heldout", n_starts=2, horizon=2)
    assert tracker.on_export(1) == {} and read_recommended(run) is None
    (RunFiles.of(run).world_model / "latest").write_text("v000001\n")
    (RunFiles.of(run).policies / "v000002" / "config.json").write_text("{")
    assert tracker.on_export(2) == {"recommend/errors": 1.0} and read_recommended(run) is None
    assert tracker.on_export(3)["recommend/version"] == 3.0


def test_write_recommended_refuses_a_missing_version(tmp_path):
    make_run(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        write_recommended(tmp_path, 9)
    assert read_recommended(tmp_path) is None


def test_the_bridge_policy_source_follows_recommended(tmp_path):
    make_run(tmp_path, a0s=(-0.8, 0.6))
    shapes = {"state": (39,)}
    follow = PolicySource(tmp_path, shapes, action_dim=4, follow="recommended")
    latest = PolicySource(tmp_path, shapes, action_dim=4)
    assert follow.refresh() and follow.version == 2  # nothing recommended yet: latest
    write_recommended(tmp_path, 1)
    assert follow.refresh() and follow.version == 1
    PolicyRegistry(tmp_path).publish(*policy_tensors(0.3))
    assert not follow.refresh() and follow.version == 1  # a new export does not move it
    assert latest.refresh() and latest.version == 3
    obs, hold = {"state": np.zeros(39, np.float32)}, np.zeros(4, np.float32)
    assert follow.act(obs, hold)[0] == pytest.approx(-0.8, abs=1e-6)
    with pytest.raises(ValueError, match="latest or recommended"):
        PolicySource(tmp_path, shapes, action_dim=4, follow="best")


def test_following_recommended_loads_no_torch():
    code = ("import sys; import robot_bridge.core.policy_source, worldsample.evaluation.recommend; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
