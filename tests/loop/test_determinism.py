"""Issue 17, item 7: every arm is a function of its seeds. Two runs of the state profile's loop in
ppl mode (the arm with the most moving parts: world-model rounds with two members, synthesis with
the uncertainty veto, PPL's pacing and Q-aware selection, the simulated human) from copies of the
same demonstrations give the same metrics row for row and the same final actor, bit for bit."""

import shutil
from pathlib import Path

import numpy as np

from worldsample.config import load_config
from worldsample.loop.loop import Loop, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.policy import PolicyRegistry
from worldsample.store import EpisodeStore

from ..trainer.tiny import rows

STATE = Path(__file__).resolve().parents[2] / "configs" / "bench" / "state.yaml"
TINY = [
    "env.max_episode_steps=30",
    "demos.episodes=2",
    "loop.real_steps=90",
    "loop.ppl.mode=ppl",
    "loop.eval_episodes=1",
    "loop.eval_every_episodes=2",
    "loop.tensorboard=false",
    "loop.recommend=false",  # imagined scoring stops on a wall-clock budget: kept out of learning by design
    "loop.min_real_for_learning=32",
    "loop.learner.hidden=[16,16]",
    "loop.learner.batch_size=16",
    "loop.learner.utd=1",  # the profile's 10 critics stay: the batched ensemble repeats too
    "loop.learner.bc_pretrain_steps=5",
    "loop.learner.critic_warmup_updates=2",
    "loop.wm_every_episodes=1",
    "loop.synth_every_episodes=1",
    "loop.synth_branches=6",
    "loop.synth.horizon=3",
    "loop.world_model.train.ae_steps=5",
    "loop.world_model.train.dyn_steps=5",
    "loop.world_model.train.batch=8",
    "loop.world_model.train.holdout_every=2",
    "loop.world_model.dynamics.width=8",
    "loop.world_model.dynamics.blocks=1",
    "loop.world_model.dynamics.cond_dim=8",
    "loop.ppl.rho_max=0.9",
    "loop.ppl.kappa=0.01",
    "loop.ppl.q_probe=8",
]
WALL_CLOCK = ("seconds", "_s", "_ms")  # timings (and the row's `time`) differ run to run; nothing else may


def _learn(run: Path, cfg):
    parts = build_parts(run, cfg, EpisodeStore(run))
    Loop(run, cfg.loop, parts, schedule_for(cfg.loop)).run()
    version = PolicyRegistry(run).latest_version()
    _, tensors = PolicyRegistry(run).load(version)
    measured = [{k: v for k, v in r.items() if k != "time" and not k.endswith(WALL_CLOCK)} for r in rows(run)]
    return measured, version, tensors


def test_a_ppl_run_repeats_exactly_from_its_seeds(tmp_path):
    from worldsample.demos import collect_demos

    cfg = load_config(STATE, TINY)
    demos = tmp_path / "demos"
    collect_demos(demos, cfg, cfg.demos.episodes)
    results = []
    for name in ("a", "b"):
        shutil.copytree(demos, tmp_path / name)
        results.append(_learn(tmp_path / name, cfg))
    (rows_a, version_a, actor_a), (rows_b, version_b, actor_b) = results
    assert any(r.get("batch/synthetic_share", 0) > 0 for r in rows_a), "no synthetic row: synthesis not covered"
    assert any(r.get("synth/written", 0) > 0 for r in rows_a)
    assert len(rows_a) == len(rows_b)
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=True)):
        assert ra == rb, f"metrics row {i} differs: " + str({k: (ra.get(k), rb.get(k)) for k in ra.keys() | rb.keys()
                                                             if ra.get(k) != rb.get(k)})
    assert version_a == version_b
    for k in actor_a:
        np.testing.assert_array_equal(actor_a[k], actor_b[k], err_msg=k)
