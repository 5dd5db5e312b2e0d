"""World-model policy evaluation benchmark: how well imagined scores rank checkpoints by real success.

    .venv/bin/python bench/policy_eval.py RUN [RUN ...]     # each run: its policies in its own world model
    .venv/bin/python bench/policy_eval.py RUN --world-model 3 --policies all --episodes 20 --n-starts 20
    .venv/bin/python bench/policy_eval.py RUN --search 8 --search-horizon 10  # also Best-of-N on the last policy

For each run directory (policies in RUN/policies/, a world model in RUN/world_model/, the arm from
RUN/config.yaml): every selected checkpoint is scored in the world model (imagined success from
the simulated arm's evaluation resets by default, so imagined and real start from the same states)
and on the simulated arm (deterministic, held-out seeds). Printed per run and per imagined score
(success rate, soft success probability, predicted return): Pearson, Spearman, MMRV and MMRV of a
constant score (the baseline every ranking must beat; ratio < 1 is better than it), and whether
the recommended checkpoint's real success is within 10 points of the best one's.

Nothing is written into the run directories; `--out` takes the JSON of everything measured.
Aim (DriftWorld, ALGORITHMS.md section 4): Pearson up to 0.99; at least 8 checkpoints of clearly
different quality per world model for numbers that mean anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from worldsample.evaluation.policies import SCORE_FIELDS, evaluate_policies, parse_versions, plot_scatter  # noqa: E402
from worldsample.policy import PolicyRegistry  # noqa: E402

console = Console(width=160)


def fmt(v, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--policies", default=None, help="versions (v3,v7 or all); default up to 10 spread evenly")
    ap.add_argument("--world-model", type=int, default=None, help="world-model version (default latest)")
    ap.add_argument("--starts", default="sim", choices=["sim", "heldout", "auto"])
    ap.add_argument("--n-starts", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=20, help="real episodes per checkpoint")
    ap.add_argument("--horizon", type=int, default=None, help="imagined steps (default: the arm's episode length)")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search", type=int, default=0, help="N of a Best-of-N run on the last policy (0: none)")
    ap.add_argument("--search-horizon", type=int, default=10)
    ap.add_argument("--search-episodes", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="JSON of every measurement")
    ap.add_argument("--plot-dir", type=Path, default=None, help="one scatter PNG per run")
    args = ap.parse_args(argv)

    results = []
    table = Table(title="imagined vs real success of checkpoints (per run, one world model each)")
    for col in ("run", "wm", "ckpts", "score", "Pearson", "Spearman", "MMRV", "MMRV const", "ratio",
                "recommended (real)", "best (real)", "within 10 pts", "seconds"):
        table.add_column(col, justify="right")
    for run in args.runs:
        t0 = time.perf_counter()
        versions = parse_versions(args.policies, PolicyRegistry(run).versions())
        console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {run}: {len(versions)} checkpoints {versions}")
        rep = evaluate_policies(run, versions, real=True, starts=args.starts, n_starts=args.n_starts,
                                horizon=args.horizon, samples=args.samples, seed=args.seed, episodes=args.episodes,
                                wm_version=args.world_model,
                                on_progress=lambda m: console.print(f"  [dim]{m}[/]", highlight=False))
        within = (rep["recommended_real_success"] is not None
                  and rep["best_real_success"] - rep["recommended_real_success"] <= 0.10 + 1e-9)
        for field in SCORE_FIELDS:
            m = rep["metrics"][field]
            ratio = m["mmrv"] / m["mmrv_constant"] if m["mmrv_constant"] else None
            table.add_row(run.name if field == SCORE_FIELDS[0] else "", rep["world_model"], str(len(versions)), field,
                          fmt(m["pearson"]), fmt(m["spearman"]), fmt(m["mmrv"], 3), fmt(m["mmrv_constant"], 3),
                          fmt(ratio), f"{rep['recommended']} ({fmt(rep['recommended_real_success'])})",
                          f"{rep['best_real']} ({fmt(rep['best_real_success'])})", "yes" if within else "no",
                          f"{time.perf_counter() - t0:.0f}")
        entry = {"run": str(run), "report": rep, "recommended_within_10_points": within}
        if args.plot_dir is not None:
            png = plot_scatter(rep, args.plot_dir / f"{run.name}_policy_eval.png")
            entry["plot"] = None if png is None else str(png)
        if args.search:
            from worldsample.evaluation.imagined import load_world_model
            from worldsample.evaluation.policies import run_env_config
            from worldsample.evaluation.search import run_search
            from worldsample.evaluation.starts import eval_seed0
            from worldsample.policy import load_actor

            model, _ = load_world_model(run, args.world_model)
            seeds = [eval_seed0() + i for i in range(args.search_episodes)]
            s = run_search(model, load_actor(run, max(versions)), run_env_config(run), seeds, args.search,
                           args.search_horizon, samples=args.samples, seed=args.seed)
            console.print(f"  best-of-{args.search} on v{max(versions)}: base {fmt(s['base_success'])} -> "
                          f"{fmt(s['search_success'])} ({100 * s['gain']:+.0f} points)", highlight=False)
            entry["search"] = {k: v for k, v in s.items() if not k.endswith("_episodes")}
        results.append(entry)
    console.print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, default=str))
        console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
