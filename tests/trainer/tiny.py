"""A tiny trainer configuration (state only, small networks, short episodes, frequent rounds and
checkpoints) shared by the tests that run the whole job, and reading a run's metrics."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--set",
    "env.cameras=[]",
    "--set",
    "env.max_episode_steps=40",
    "--set",
    "loop.eval_episodes=1",
    "--set",
    "loop.learner.hidden=[32,32]",
    "--set",
    "loop.learner.batch_size=64",
    "--set",
    "loop.learner.utd=1",
    "--set",
    "loop.min_real_for_learning=64",
    "--set",
    "loop.synth_branches=4",
    "--set",
    "loop.synth.horizon=5",
    "--set",
    "loop.wm_every_episodes=2",
    "--set",
    "loop.synth_every_episodes=1",
    "--set",
    "loop.checkpoint_every_episodes=1",
    "--set",
    "loop.world_model.train.ae_steps=20",
    "--set",
    "loop.world_model.train.dyn_steps=20",
    "--set",
    "loop.ppl.q_probe=32",
    "--set",
    "loop.learner.bc_pretrain_steps=30",
    "--set",
    "loop.learner.critic_warmup_updates=10",
]


def rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
