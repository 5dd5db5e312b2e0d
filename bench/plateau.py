"""Where learning stalls: the held-out starts a run's first policy (behaviour cloning) and its last
policy fail, and whether the arm's own sampling ever wins the starts the last policy fails.

    MUJOCO_GL=egl .venv/bin/python bench/plateau.py RUN [RUN ...] [--starts 50] [--tries 10] [--scales 1,0.1]

For each run (the arm from RUN/config.yaml), on the loop's held-out evaluation starts (the same
states, in the same order, as its evaluations): the first exported policy's and the latest's
deterministic success per start, how many starts each fails, how many both fail, how many the
training won and lost. Then, on every start the latest policy fails, `--tries` episodes of the same
policy sampling its actions with its spread times each scale (`loop.explore_scale`; the loop's arm
samples with 1 until half the budget and 0.1 from three quarters on): on how many of those starts
some try wins, and the share of tries that win (a start none of the tries wins is one where the arm's
own success reward comes rarely, if at all). Last, the run's own online episodes (the store's
`real` group): how many started where the first policy fails (its mean, replayed from each
episode's start) and how many of those the arm won without a human step: the successes the learner
had to learn past behaviour cloning from.
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
from worldsample.evaluation.real import eval_env, run_episodes  # noqa: E402
from worldsample.evaluation.starts import eval_seed0  # noqa: E402
from worldsample.policy import load_actor  # noqa: E402
from worldsample.store import EpisodeStore  # noqa: E402


def wins(env, actor, seeds: list[int], scale: float | None, rng: np.random.Generator) -> list[bool]:
    """One episode per seed: the mean action (scale None) or the action sampled with spread x scale."""
    if scale is None:
        act = actor.act
    else:
        def act(obs):
            return actor.act(obs, explore=True, rng=rng, noise_scale=scale)
    return [bool(e["success"]) for e in run_episodes(env, act, seeds)]


def plateau(run: Path, starts: int, tries: int, scales: list[float], seed: int) -> dict:
    cfg = load_run_config(run)
    first, last = load_actor(run, 1), load_actor(run, None)
    seeds = [eval_seed0() + i for i in range(starts)]
    env = eval_env(cfg.env)
    rng = np.random.default_rng(seed)
    try:
        won0 = wins(env, first, seeds, None, rng)
        won1 = wins(env, last, seeds, None, rng)
        failed = [s for s, w in zip(seeds, won1, strict=True) if not w]
        sampled = {}
        for sc in scales:
            per_start = [sum(wins(env, last, [s] * tries, sc, rng)) for s in failed]
            sampled[sc] = {"starts_won": sum(n > 0 for n in per_start),
                           "tries_won": sum(per_start) / max(len(failed) * tries, 1)}
        # the run's own episodes, on the starts the first policy fails
        recs = EpisodeStore(run).reader("real").episode_records()
        starts_seen = sorted({int(r.extra["seed"]) for r in recs if "seed" in r.extra})
        bc_wins = dict(zip(starts_seen, wins(env, first, starts_seen, None, rng), strict=True))
        hard = [r for r in recs if "seed" in r.extra and not bc_wins[int(r.extra["seed"])]]
        own = {"episodes": len(recs), "on_hard": len(hard),
               "won_alone": sum(r.success and r.interventions == 0 for r in recs),
               "hard_won_alone": sum(r.success and r.interventions == 0 for r in hard)}
    finally:
        env.close()
    w0, w1 = np.asarray(won0), np.asarray(won1)
    return {"run": str(run), "first_version": first.version, "last_version": last.version, "starts": starts,
            "first_success": float(w0.mean()), "last_success": float(w1.mean()),
            "first_fails": int((~w0).sum()), "last_fails": int((~w1).sum()), "both_fail": int((~w0 & ~w1).sum()),
            "gained": int((~w0 & w1).sum()), "lost": int((w0 & ~w1).sum()), "tries": tries,
            "sampled": {str(k): v for k, v in sampled.items()}, "own": own}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--starts", type=int, default=50, help="held-out starts (the final evaluation's 50)")
    ap.add_argument("--tries", type=int, default=10, help="sampled episodes per start the last policy fails")
    ap.add_argument("--scales", default="1,0.1", help="spread scales to sample with, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    scales = [float(x) for x in args.scales.split(",")]
    rows = [plateau(run, args.starts, args.tries, scales, args.seed) for run in args.runs]
    t = Table(title=f"{args.starts} held-out starts; {args.tries} sampled tries on each start the last policy fails")
    for col in ("run", "first -> last", "fails: first / last / both", "gained / lost",
                *(f"last's fails, sampling x{sc:g}: starts won, tries won" for sc in scales),
                "own episodes: all / won alone", "on the first's fails: all / won alone"):
        t.add_column(col)
    for r in rows:
        t.add_row(Path(r["run"]).name, f"v{r['first_version']} {r['first_success']:.0%} -> "
                  f"v{r['last_version']} {r['last_success']:.0%}",
                  f"{r['first_fails']} / {r['last_fails']} / {r['both_fail']}", f"{r['gained']} / {r['lost']}",
                  *(f"{r['sampled'][str(sc)]['starts_won']} of {r['last_fails']}, "
                    f"{r['sampled'][str(sc)]['tries_won']:.0%}" for sc in scales),
                  f"{r['own']['episodes']} / {r['own']['won_alone']}",
                  f"{r['own']['on_hard']} / {r['own']['hard_won_alone']}")
    Console(width=180).print(t)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
