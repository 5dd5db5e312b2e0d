"""World-model policy evaluation benchmark: how well imagined scores rank checkpoints by real success,
and what Best-of-N search in the world model adds to a policy.

    .venv/bin/python bench/policy_eval.py RUN [RUN ...]     # each run: its policies in its own world model
    .venv/bin/python bench/policy_eval.py RUN --policies all --episodes 20 --n-starts 20 \\
        --world-model latest,latest~1                        # two world models of each run, same checkpoints
    .venv/bin/python bench/policy_eval.py RUN --search 8 --search-score success,value  # + Best-of-N

For each run directory (policies in RUN/policies/, world models in RUN/world_model/, the arm from
RUN/config.yaml): every selected checkpoint runs on the simulated arm once (deterministic,
held-out seeds 10000...) and is scored in each world model given by `--world-model` (imagined
success from the arm's evaluation resets by default, so imagined and real start from the same
states). Printed per run, world model and imagined score (success rate, soft success probability,
predicted return): Pearson, Spearman, MMRV and MMRV of a constant score (the baseline every ranking
must beat; ratio < 1 is better than it), and whether the recommended checkpoint's real success is
within 10 points of the best one's. A second baseline row ranks checkpoints by their version
number (newer = better: what deploying the latest assumes).

`--world-model` takes a comma-separated list of versions: a number, `latest`, or `latest~K` (K
versions before the latest), each optionally named (`loop=latest~1,demo=1`). `--search N` runs
Best-of-N on one checkpoint (`--search-policy`: the last one, the one of median real success, or
the best) once per `--search-score` (success: imagined success then return; value: the learner's
return so far + gamma^H V from the run's trainer checkpoint; critic: the same critic's Q of each
candidate's first action, no world model, the ablation that shows what the model adds to value;
random: a candidate drawn at random, the control for the candidates' noise alone), in the first
world model listed, against the base policy from the same initial states.

Nothing is written into the run directories; `--out` takes the JSON of everything measured,
`--md` the table as Markdown, `--plot` one scatter PNG (a panel per world model, a colour per run).
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
from worldsample.errors import ConfigError  # noqa: E402
from worldsample.evaluation.metrics import ranking_report  # noqa: E402
from worldsample.evaluation.policies import (  # noqa: E402
    SCORE_FIELDS,
    evaluate_policies,
    parse_versions,
    run_env_config,
)
from worldsample.paths import RunFiles  # noqa: E402
from worldsample.policy import PolicyRegistry  # noqa: E402
from worldsample.versioned import VersionedDir  # noqa: E402

console = Console(width=200)
COLUMNS = ("run", "world model", "ckpts", "score", "Pearson", "Spearman", "MMRV", "MMRV const", "ratio",
           "recommended (real)", "best (real)", "within 10 pts")


def fmt(v, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def say(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {msg}", highlight=False)


def label_of(spec: str) -> str:
    """`loop=latest~1` -> `loop`; a spec without a label is its own label."""
    return spec.split("=", 1)[0].strip() if "=" in spec else spec.strip()


def resolve_world_model(run: Path, spec: str) -> int:
    """`latest`, `latest~K` or a version number (optionally after `label=`) -> the version."""
    versions = VersionedDir(RunFiles.of(run).world_model).versions()
    if not versions:
        raise ConfigError(f"{run} has no world model")
    spec = spec.split("=", 1)[-1].strip()
    if spec == "latest" or spec.startswith("latest~"):
        back = int(spec.removeprefix("latest~") or 0) if "~" in spec else 0
        if back >= len(versions):
            raise ConfigError(f"{run} has {len(versions)} world-model versions; {spec} does not exist")
        return versions[-1 - back]
    v = int(spec.removeprefix("v"))
    if v not in versions:
        raise ConfigError(f"world model v{v} is not in {run} (it has {versions})")
    return v


def measure_real(run: Path, versions: list[int], episodes: int, cache: Path | None = None) -> dict:
    """Every checkpoint on the simulated arm, once (version -> RealScore). With `cache` (a directory),
    scores of the same run, version and episode count measured by an earlier call are read back
    (the arm is deterministic: the same policy from the same seeds gives the same episodes)."""
    from worldsample.evaluation.real import RealScore, eval_env, score_real
    from worldsample.policy import load_actor

    path = None if cache is None else cache / f"{run.resolve().name}_real_{episodes}.json"
    out: dict[int, RealScore] = {}
    if path is not None and path.exists():
        out = {int(v): RealScore(**d) for v, d in json.loads(path.read_text()).items() if int(v) in versions}
        if out:
            say(f"  real scores of {sorted(out)} from {path}")
    todo = [v for v in versions if v not in out]
    if todo:
        env_cfg = run_env_config(run)
        env = eval_env(env_cfg)
        try:
            for v in todo:
                out[v] = score_real(load_actor(run, v), env_cfg, episodes, env=env)
                say(f"  v{v}: real {100 * out[v].success_rate:.0f}% ({out[v].seconds:.0f} s)")
        finally:
            env.close()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps(old | {str(v): s.to_dict() for v, s in out.items()}, indent=1))
    return {v: out[v] for v in versions}


def search_policy(kind: str, versions: list[int], real: dict) -> int:
    if kind == "last":
        return max(versions)
    by_real = sorted(versions, key=lambda v: (real[v].success_rate, v))
    if kind == "best":
        return by_real[-1]
    if kind == "median":
        return by_real[(len(by_real) - 1) // 2]
    raise ConfigError(f"--search-policy must be last, median or best, got {kind!r}")


def plot(entries: list[dict], wm_specs: list[str], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        console.print("no plot: matplotlib is not installed (pip install -e '.[bench]')")
        return None
    fig, axes = plt.subplots(1, len(wm_specs), figsize=(3.6 * len(wm_specs), 3.5), dpi=90, squeeze=False)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    runs = list(dict.fromkeys(e["run"] for e in entries))
    for ax, spec in zip(axes[0], wm_specs, strict=True):
        ax.plot([0, 1], [0, 1], color="0.85", lw=1, zorder=0)
        for e in (e for e in entries if e["wm_spec"] == spec):
            rep, c = e["report"], colours[runs.index(e["run"]) % len(colours)]
            names = list(rep["real"])
            x = [rep["imagined"][n]["success_rate"] for n in names]
            y = [rep["real"][n]["success_rate"] for n in names]
            ax.scatter(x, y, s=18, color=c, alpha=0.8,
                       label=f"{Path(e['run']).name} {rep['world_model']}: r {fmt(rep['pearson'])}, "
                             f"rho {fmt(rep['spearman'])}")
            rec = rep["recommended"]
            ax.scatter([rep["imagined"][rec]["success_rate"]], [rep["real"][rec]["success_rate"]], marker="*",
                       s=120, color=c, edgecolor="k", linewidth=0.5, zorder=3)
        ax.set_title(f"world model: {label_of(spec)}", fontsize=9)
        ax.set_xlabel("imagined success", fontsize=8)
        ax.set_ylabel("real success (simulated arm)", fontsize=8)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def rows_of(entries: list[dict]) -> list[list[str]]:
    """Table rows: per run and world model one per imagined score, then per run the version-order baseline."""
    rows = []
    for run in dict.fromkeys(e["run"] for e in entries):
        mine = [e for e in entries if e["run"] == run]
        for e in mine:
            rep = e["report"]
            for field in SCORE_FIELDS:
                m = rep["metrics"][field]
                ratio = m["mmrv"] / m["mmrv_constant"] if m["mmrv_constant"] else None
                rows.append([Path(run).name, f"{label_of(e['wm_spec'])}: {rep['world_model']} ({rep['generator']})",
                             str(len(rep["real"])), field, fmt(m["pearson"]), fmt(m["spearman"]), fmt(m["mmrv"], 3),
                             fmt(m["mmrv_constant"], 3), fmt(ratio),
                             f"{rep['recommended']} ({fmt(rep['recommended_real_success'])})",
                             f"{rep['best_real']} ({fmt(rep['best_real_success'])})",
                             "yes" if e["recommended_within_10_points"] else "no"])
        real = {int(k.removeprefix("v")): d["success_rate"] for k, d in mine[0]["report"]["real"].items()}
        versions = sorted(real)
        R = [real[v] for v in versions]
        order = ranking_report([float(v) for v in versions], R)
        newest, best = max(versions), max(versions, key=lambda v: (real[v], v))
        ratio = order["mmrv"] / order["mmrv_constant"] if order["mmrv_constant"] else None
        rows.append([Path(run).name, "baseline: version order", str(len(versions)), "version number",
                     fmt(order["pearson"]), fmt(order["spearman"]), fmt(order["mmrv"], 3),
                     fmt(order["mmrv_constant"], 3), fmt(ratio), f"v{newest} ({fmt(real[newest])})",
                     f"v{best} ({fmt(real[best])})", "yes" if real[best] - real[newest] <= 0.10 + 1e-9 else "no"])
    return rows


def report(entries: list[dict], searches: list[dict], md_path: Path | None, plot_path: Path | None) -> None:
    """Print the tables; write them as Markdown and the scatter plot when asked."""
    rows = rows_of(entries)
    table = Table(title="imagined vs real success of checkpoints (per run and world model)")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    md = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS), *("| " + " | ".join(r) + " |" for r in rows)]
    if searches:
        st = Table(title="Best-of-N in the world model vs the base policy (same initial states)")
        cols = ("run", "world model", "policy", "score", "N", "horizon", "candidates", "episodes", "base", "best-of-N",
                "gain (points)", "chose base", "mean decision ms")
        for col in cols:
            st.add_column(col, justify="right")
        md += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for s in searches:
            d = s["decisions"]
            cand = "policy samples" if s.get("spread") is None else f"action + N(0, {s['spread']:g}^2)"
            r = [Path(s["run"]).name, s["world_model"], s["policy"], s["score"], str(s["n"]), str(s["horizon"]), cand,
                 str(s["episodes"]),
                 f"{100 * s['base_success']:.0f} %", f"{100 * s['search_success']:.0f} %", f"{100 * s['gain']:+.0f}",
                 f"{d['chose_base']} / {d['searched']}", fmt(None if d["mean_decision_s"] is None
                                                          else 1000 * d["mean_decision_s"], 1)]
            st.add_row(*r)
            md.append("| " + " | ".join(r) + " |")
        console.print(st)
    if md_path is not None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text("\n".join(md) + "\n")
        say(f"wrote {md_path}")
    if plot_path is not None and entries:
        png = plot(entries, list(dict.fromkeys(e["wm_spec"] for e in entries)), plot_path)
        if png is not None:
            say(f"wrote {png}")


def random_critic(model, seed: int):
    """A 'critic' of uniform random values: score=critic with it executes a random candidate, the
    control for the candidates' own noise (with a spread, the base action plus noise)."""
    import numpy as np

    from worldsample.evaluation.critic import Critic

    rng = np.random.default_rng(seed)
    return Critic(nets=[lambda x, a: rng.random(len(x))], obs_keys=list(model.cfg.vector_keys))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run directories")
    ap.add_argument("--summarise", nargs="+", type=Path, default=None, metavar="JSON",
                    help="measure nothing: the tables and plot from earlier --out files, together")
    ap.add_argument("--policies", default=None, help="versions (v3,v7 or all); default up to 10 spread evenly")
    ap.add_argument("--world-model", default="latest",
                    help="comma-separated: N, latest or latest~K, each optionally named, e.g. loop=latest~1 "
                         "(default latest)")
    ap.add_argument("--starts", default="sim", choices=["sim", "heldout", "auto"])
    ap.add_argument("--n-starts", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=20, help="real episodes per checkpoint")
    ap.add_argument("--horizon", type=int, default=None, help="imagined steps (default: the arm's episode length)")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search", type=int, default=0, help="N of a Best-of-N run (0: none)")
    ap.add_argument("--search-horizon", type=int, default=10)
    ap.add_argument("--search-episodes", type=int, default=10)
    ap.add_argument("--search-score", default="success", help="comma-separated: success, value, critic "
                    "(the critic's Q of each candidate's first action, no world model: what the model adds to value), "
                    "random (a candidate drawn at random: what the candidates' noise does without any choosing)")
    ap.add_argument("--search-policy", default="last", choices=["last", "median", "best"])
    ap.add_argument("--search-spread", type=float, default=None,
                    help="candidates: the deterministic action + N(0, spread^2) instead of the policy's own samples")
    ap.add_argument("--out", type=Path, default=None, help="JSON of every measurement")
    ap.add_argument("--md", type=Path, default=None, help="the table as Markdown")
    ap.add_argument("--plot", type=Path, default=None, help="one scatter PNG: a panel per world model")
    ap.add_argument("--real-cache", type=Path, default=None,
                    help="directory that keeps the arm's scores per run, version and episode count between calls")
    ap.add_argument("--real-only", action="store_true", help="only measure the arm (fills --real-cache)")
    ap.add_argument("--search-only", action="store_true", help="the arm and Best-of-N, no ranking of checkpoints")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default torch's; 1 on a loaded box)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    wm_specs = [s.strip() for s in args.world_model.split(",") if s.strip()]
    search_scores = [s.strip() for s in args.search_score.split(",") if s.strip()]
    if unknown := set(search_scores) - {"success", "value", "critic", "random"}:
        raise SystemExit(f"--search-score takes success, value, critic and/or random, not {sorted(unknown)}")

    if args.summarise:
        docs = [json.loads(p.read_text()) for p in args.summarise]
        report([e for d in docs for e in d["entries"]], [x for d in docs for x in d["searches"]], args.md, args.plot)
        return 0
    if not args.runs:
        raise SystemExit("give run directories (or --summarise JSON ...)")
    t_all = time.perf_counter()
    entries, searches = [], []
    # resolved once, before anything runs: a bad spec fails now, and a run that gets a new world model
    # while this benchmark runs (training beside it) is still scored in the versions it had at the start
    wm_of_run = {run: {spec: resolve_world_model(run, spec) for spec in wm_specs} for run in args.runs}
    for run in args.runs:
        versions = parse_versions(args.policies, PolicyRegistry(run).versions())
        say(f"{run}: {len(versions)} checkpoints {versions}; {args.episodes} real episodes each")
        t0 = time.perf_counter()
        real = measure_real(run, versions, args.episodes, args.real_cache)
        t_real = time.perf_counter() - t0
        if args.real_only:
            continue
        wm_of = wm_of_run[run]
        for spec in wm_specs if not args.search_only else []:
            wm_v = wm_of[spec]
            t1 = time.perf_counter()
            rep = evaluate_policies(run, versions, real=True, starts=args.starts, n_starts=args.n_starts,
                                    horizon=args.horizon, samples=args.samples, seed=args.seed,
                                    episodes=args.episodes, wm_version=wm_v, real_scores=real)
            t_im = time.perf_counter() - t1
            within = (rep["recommended_real_success"] is not None
                      and rep["best_real_success"] - rep["recommended_real_success"] <= 0.10 + 1e-9)
            pairs = [(100 * rep["imagined"][f"v{v}"]["success_rate"], 100 * real[v].success_rate) for v in versions]
            say(f"  world model {label_of(spec)} = v{wm_v} ({rep['generator']}): imagined in {t_im:.0f} s; "
                + ", ".join(f"v{v} {a:.0f}/{b:.0f}" for v, (a, b) in zip(versions, pairs, strict=True))
                + " (imagined/real %)")
            entries.append({"run": str(run), "wm_spec": spec, "wm_label": label_of(spec), "wm_version": wm_v,
                            "report": rep, "recommended_within_10_points": within, "seconds_imagined": t_im,
                            "seconds_real": t_real})
        if args.search:
            from worldsample.evaluation.critic import load_critic
            from worldsample.evaluation.imagined import load_world_model
            from worldsample.evaluation.search import run_search
            from worldsample.evaluation.starts import eval_seed0
            from worldsample.policy import load_actor

            wm_v = wm_of[wm_specs[0]]
            model, _ = load_world_model(run, wm_v)
            base_v = search_policy(args.search_policy, versions, real)
            seeds = [eval_seed0() + i for i in range(args.search_episodes)]
            for score in search_scores:
                critic = random_critic(model, args.seed) if score == "random" else (
                    load_critic(run) if score in ("value", "critic") else None)
                t1 = time.perf_counter()
                s = run_search(model, load_actor(run, base_v), run_env_config(run), seeds, args.search,
                               args.search_horizon, samples=args.samples, seed=args.seed, critic=critic,
                               score="critic" if score == "random" else score, spread=args.search_spread)
                s["score"] = score
                d = s["decisions"]
                say(f"  best-of-{args.search} ({score}) on v{base_v} in world model v{wm_v}: base "
                    f"{fmt(s['base_success'])} -> {fmt(s['search_success'])} ({100 * s['gain']:+.0f} points; "
                    f"chose the base chunk in {d['chose_base']} of {d['searched']} decisions, "
                    f"{time.perf_counter() - t1:.0f} s)")
                searches.append({"run": str(run), "world_model": f"v{wm_v}", "policy": f"v{base_v}",
                                 "policy_kind": args.search_policy, "spread": args.search_spread,
                                 **{k: v for k, v in s.items() if not k.endswith("_episodes")},
                                 "base_successes": [e["success"] for e in s["base_episodes"]],
                                 "search_successes": [e["success"] for e in s["search_episodes"]]})
    report(entries, searches, args.md, args.plot)
    say(f"total {time.perf_counter() - t_all:.0f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "entries": entries,
                                        "searches": searches, "seconds": time.perf_counter() - t_all},
                                       indent=1, default=str))
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
