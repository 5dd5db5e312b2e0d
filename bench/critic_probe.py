"""Does a run's critic know what the human knows? Its Q on the scripted expert's action against the
policy's own, at the states where the policy strays.

    MUJOCO_GL=egl .venv/bin/python bench/critic_probe.py RUN [RUN ...] [--episodes 10] [--seed 0] [--json OUT]

For each run: the learner of its last trainer checkpoint (RUN/trainer), the arm from RUN/config.yaml.
The scripted expert drives the held-out evaluation starts (so every state lies on a path that
succeeds); at each state the probe asks the learner's actor for its mean action a_pi and the critic
(the ensemble mean, what the actor climbs) for Q(s, a_expert), Q(s, a_pi) and Q(s, a_random). Printed,
over all states and over the states where the policy strays (its motion differs from the expert's by
more than the simulated human's threshold, where the human would take over):
- how often the critic prefers the expert's action to the policy's, and to a uniform random action:
  the actor's gradient can correct a mistake only where the critic ranks the correction higher;
- the mean gap Q(expert) - Q(policy) at the stray states;
- the critic's calibration on the expert's path: the correlation of Q(s, a_expert) with the return the
  expert then earned (gamma^(steps to the success)), and their mean. With `loop.shaping` the critic
  learns Q - Phi(s), so these two compare only for runs without shaping (the action preferences
  compare for all: Phi does not depend on the action).
The last line per run: the share of stray states where the critic prefers the expert, over 0.5 (a
critic that cannot tell the actions apart scores 1.0x). A run with `learner.action_chunk` k is asked
about chunks: the expert's next k actions on its path (its last one repeated past the success), the
policy's chunk and a random one; "strays" compares their first actions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsample.config import load_run_config  # noqa: E402
from worldsample.evaluation.starts import eval_seed0  # noqa: E402


def load_learning(run: Path, cfg):
    from worldsample.loop.checkpoint import load_checkpoint
    from worldsample.loop.learning import Learning, learner_spaces
    from worldsample.store import EpisodeStore

    saved = load_checkpoint(run / "trainer")
    if saved is None:
        raise SystemExit(f"{run}: no trainer checkpoint under {run / 'trainer'}")
    obs_dims, low, high = learner_spaces(EpisodeStore(run), cfg.loop)
    learning = Learning(run, cfg.loop, obs_dims, low, high)
    learning.load_state(saved[0]["learner"])
    return learning, saved[1]


def expert_states(env, cfg, episodes: int, seed: int) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """(observations, expert actions, steps to the success) along expert episodes that succeeded; with
    learner.action_chunk, each step's action is the chunk the expert plays from it."""
    from worldsample.loop.learning import chunk_actions
    from worldsample.sim import ScriptedExpert

    obs_all, act_all, to_go, lengths = [], [], [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=eval_seed0() + i)
        expert = ScriptedExpert(env, cfg.demos.expert, seed=seed + i)
        obs_ep, act_ep = [], []
        for _ in range(cfg.env.max_episode_steps):
            a = expert.nominal_action()
            obs_ep.append(obs)
            act_ep.append(a)
            obs, _, terminated, truncated, info = env.step(a)
            if terminated or truncated:
                break
        if info.get("success"):
            obs_all += obs_ep
            act_all += act_ep
            to_go += list(range(len(obs_ep), 0, -1))
            lengths.append(len(obs_ep))
    actions = chunk_actions(np.asarray(act_all, np.float32), np.asarray(lengths), cfg.loop.learner.action_chunk)
    return obs_all, actions, np.asarray(to_go)


def probe(learning, cfg, obs: list[dict], a_exp: np.ndarray, to_go: np.ndarray, seed: int) -> dict:
    agent, keys = learning.agent, learning.keys
    batch = {f"obs/{k}": np.stack([o[k] for o in obs]).astype(np.float32) for k in keys}
    a_pi = np.stack([agent.act(o) for o in obs]).astype(np.float32)
    rng = np.random.default_rng(seed)
    a_rand = rng.uniform(-1, 1, a_exp.shape).astype(np.float32)
    q = {name: agent.q_values({**batch, "action": a}).reshape(-1) for name, a in
         (("expert", a_exp), ("policy", a_pi), ("random", a_rand))}
    stray = np.linalg.norm(a_pi[:, :3] - a_exp[:, :3], axis=1) > cfg.intervention.deviation_threshold
    ret = cfg.loop.learner.gamma ** (to_go - 1)  # the sparse reward 1 at the success step
    out = {"states": len(obs), "stray": float(stray.mean()), "q_expert_mean": float(q["expert"].mean()),
           "return_mean": float(ret.mean()), "calibration_r": float(np.corrcoef(q["expert"], ret)[0, 1])}
    for name, m in (("all", np.ones(len(obs), bool)), ("stray", stray)):
        if not m.any():
            continue
        out[f"{name}_prefers_expert"] = float((q["expert"][m] > q["policy"][m]).mean())
        out[f"{name}_expert_over_random"] = float((q["expert"][m] > q["random"][m]).mean())
        out[f"{name}_gap"] = float((q["expert"][m] - q["policy"][m]).mean())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write every run's figures here")
    args = ap.parse_args(argv)
    rows: list[dict] = []
    from worldsample.sim import make_env

    console = Console(width=160)
    t = Table(title=f"critic probe: {args.episodes} held-out starts, driven by the scripted expert")
    for col in ("run", "updates", "states", "policy strays", "prefers expert: all / stray",
                "expert over random: all / stray", "Q gap at stray", "Q(expert) mean / return mean",
                "calibration r", "stray preference vs 0.5"):
        t.add_column(col)
    for run in args.runs:
        cfg = load_run_config(run)
        learning, meta = load_learning(run, cfg)
        env = make_env(cfg.env.model_copy(update={"cameras": []}))
        try:
            obs, a_exp, to_go = expert_states(env, cfg, args.episodes, args.seed)
        finally:
            env.close()
        r = probe(learning, cfg, obs, a_exp, to_go, args.seed)
        stray = r.get("stray_prefers_expert")
        rows.append({"run": str(run), "updates": learning.agent.updates, **r})
        t.add_row(run.name, str(learning.agent.updates), str(r["states"]), f"{r['stray']:.0%}",
                  f"{r['all_prefers_expert']:.0%} / " + ("-" if stray is None else f"{stray:.0%}"),
                  f"{r['all_expert_over_random']:.0%} / " + ("-" if stray is None else
                                                             f"{r['stray_expert_over_random']:.0%}"),
                  "-" if stray is None else f"{r['stray_gap']:+.3f}",
                  f"{r['q_expert_mean']:.3f} / {r['return_mean']:.3f}", f"{r['calibration_r']:.2f}",
                  "-" if stray is None else f"{stray / 0.5:.2f}x")
    console.print(t)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
