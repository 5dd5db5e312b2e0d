"""What exploration costs on the arm: a run's policy acting with its mean (what evaluations measure)
against the same policy sampling its actions (what collects the online data), each alone and under
the simulated human.

    MUJOCO_GL=egl .venv/bin/python bench/exploration.py RUN [RUN ...] [--version N] [--episodes 20]
        [--trigger deviation|stall|lost] [--scales 1,0.5,0.3]

For each run (the arm and the simulated human from RUN/config.yaml, the latest policy or
`--version`), on the held-out evaluation starts: success rate alone and with the human filtering
the actions, the human's share of the steps, and the per-step deviation from the scripted expert
(median, and the share of steps above the human's threshold). The last line of each run is the
exploring / deterministic ratio of the human's share: how much of the human's work the sampling
noise makes. The policy's entropy and per-coordinate spread are printed too (pre-tanh standard
deviation at the states the deterministic policy visits). With the human only watching, the
"false alarms" column counts the episodes the policy won alone on which the human would have
taken over: a human who judges the outcome should leave those alone. `--trigger` replaces the
run's trigger (InterventionConfig: `deviation` judges the motion, `stall` the progress). `--scales`
samples with the policy's spread times each scale (`loop.explore_scale`), one pair of rows per scale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsample.config import load_run_config  # noqa: E402
from worldsample.evaluation.real import run_episodes  # noqa: E402
from worldsample.evaluation.starts import eval_seed0  # noqa: E402
from worldsample.policy import load_actor  # noqa: E402


def rollouts(env, actor, cfg, episodes: int, explore: bool, human: bool, seed: int, scale: float = 1.0) -> dict:
    from worldsample.sim import InterventionExpert

    rng = np.random.default_rng(seed)
    watcher = InterventionExpert(env, cfg.intervention, seed=seed)
    dev: list[float] = []
    alarms: list[bool] = []  # per episode: did the human take over (or, watching, would it have)
    driven = 0

    def act(obs):
        nonlocal driven
        action = actor.act(obs, explore=True, rng=rng, noise_scale=scale) if explore else actor.act(obs)
        filtered, took = watcher.filter(action)  # also measures the deviation when it only watches
        dev.append(watcher.last_deviation)
        alarms[-1] |= took
        if human:
            action, driven = filtered, driven + took
        return action

    def on_reset(_):
        watcher.reset()
        alarms.append(False)

    eps = run_episodes(env, act, [eval_seed0() + i for i in range(episodes)], on_reset=on_reset)
    steps = sum(e["length"] for e in eps)
    d = np.asarray(dev)
    won = [a for a, e in zip(alarms, eps, strict=True) if e["success"]]
    return {"success": sum(e["success"] for e in eps) / episodes, "human": driven / steps, "steps": steps,
            "dev_p50": float(np.median(d)), "dev_over": float((d > cfg.intervention.deviation_threshold).mean()),
            "false_alarms": (sum(won), len(won))}


def spread(env, actor, episodes: int) -> tuple[np.ndarray, float]:
    """Median pre-tanh std per action coordinate and the mean entropy of the squashed policy (nats),
    at the states the deterministic policy visits."""
    stds, ents = [], []
    rng = np.random.default_rng(0)
    for i in range(episodes):
        obs, _ = env.reset(seed=eval_seed0() + i)
        while True:
            mean, log_std = actor.distribution(obs)
            stds.append(np.exp(log_std))
            eps = rng.standard_normal((256, mean.size))
            u = mean + np.exp(log_std) * eps
            logp = (-0.5 * eps**2 - log_std - 0.5 * np.log(2 * np.pi)).sum(1) - np.log1p(-np.tanh(u) ** 2 + 1e-6).sum(1)
            ents.append(-logp.mean())
            obs, _, terminated, truncated, info = env.step(actor.act(obs))
            if info["success"] or terminated or truncated:
                break
    return np.median(np.asarray(stds), axis=0), float(np.mean(ents))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--version", type=int, default=None, help="policy version (default: the latest)")
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trigger", choices=["deviation", "stall", "lost"], default=None,
                    help="the simulated human's trigger (default: the run's)")
    ap.add_argument("--scales", default="1", help="exploration scales to sample with, comma-separated (1: the "
                    "policy's own spread)")
    args = ap.parse_args(argv)
    from worldsample.sim import make_env

    console = Console(width=160)
    for run in args.runs:
        cfg = load_run_config(run)
        if args.trigger is not None:
            cfg.intervention.trigger = args.trigger
        actor = load_actor(run, args.version)
        env = make_env(cfg.env.model_copy(update={"cameras": []}))
        try:
            scales = [None] + [float(x) for x in args.scales.split(",")]  # None: the mean action
            rows = {(sc, h): rollouts(env, actor, cfg, args.episodes, sc is not None, h, args.seed, sc or 1.0)
                    for sc in scales for h in (False, True)}
            std, ent = spread(env, actor, min(args.episodes, 10))
        finally:
            env.close()
        t = Table(title=f"{run} policy v{actor.version}: {args.episodes} held-out starts, "
                        f"human trigger {cfg.intervention.trigger}")
        for col in ("actions", "human", "success", "human's share of steps", "deviation p50",
                    f"steps over {cfg.intervention.deviation_threshold}", "false alarms (won alone)"):
            t.add_column(col)
        for (sc, h), r in rows.items():
            alarms, won = r["false_alarms"]
            actions = "mean" if sc is None else "sampled" if sc == 1 else f"sampled, spread x{sc:g}"
            t.add_row(actions, "on" if h else "watching", f"{r['success']:.0%}",
                      f"{r['human']:.0%}" if h else "-", f"{r['dev_p50']:.2f}", f"{r['dev_over']:.0%}",
                      "-" if h else f"{alarms} of {won}")
        console.print(t)
        per_coord = [round(float(s), 3) for s in std]
        console.print(f"entropy {ent:.2f} nats; pre-tanh std per coordinate (median) {per_coord}")
        det = rows[(None, True)]["human"]
        for sc in scales[1:]:
            exp = rows[(sc, True)]["human"]
            ratio = f"{exp / det:.2f}x" if det > 0 else "n/a (the human never drove the mean policy)"
            console.print(f"human's share, sampled (spread x{sc:g}) / mean actions: {exp:.0%} / {det:.0%} = {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
