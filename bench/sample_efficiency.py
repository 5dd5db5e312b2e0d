"""Sample efficiency of the loop: real data only (`off`), a fixed synthetic share (`naive`), and
Policy-Paced Learning (`ppl`), on the same task, demonstrations and seeds; or any arms named with
`--arm NAME KEY=VALUE ...` (config overrides of that arm only).

    .venv/bin/pip install -e '.[bench]'                                   # matplotlib, for the plot
    .venv/bin/python bench/sample_efficiency.py --jobs 2                 # CPU state profile, 3 seeds
    .venv/bin/python bench/sample_efficiency.py --seeds 0 --real-steps 600  # smoke run
    .venv/bin/python bench/sample_efficiency.py --arms off --arm oracle50 loop.ppl.mode=naive \
        loop.ppl.naive_share=0.5 loop.synth.imaginer=simulator          # a named arm beside `off`

Per seed, the scripted expert records the demonstrations once; every arm trains on a copy of that
run directory with `worldsample train` (the simulated arm in lock-step, local Ray), so arms differ
only in their overrides (a preset's is its `loop.ppl.mode`; an arm's may not set `demos.*`, which
every arm shares: set those with `--set`). Success is the deterministic policy on 20
fixed held-out initial states,
measured by the trainer every few episodes. Reported: success vs real steps (PNG and table), real
steps to reach the threshold (80 %), and final success at the budget (the final evaluation takes
`loop.final_eval_episodes` states). Per arm, rliable's protocol (bench/rl_stats.py): the IQM over
seeds of final success and of the area under the success curve, with 95 % bootstrap intervals; against
the first arm (the baseline): the probability that a run of the arm beats a run of the baseline, the
difference in steps to the threshold with its interval, and the smallest difference the baseline's
spread lets the protocol detect; a performance profile of final success (PNG). Diagnostics per arm: the
human's share of online steps per quarter of the budget, and the share of online episodes the exploring
(sampling) policy won with no human step, per half: what the learner gets to learn from on its own.

Profiles live in configs/bench/ (`state`: 39-dim state observations, CPU-sized; `image`: cameras +
proprioception through a frozen pixel encoder, docs/vision.md; all three arms, the world model
and synthesis working in the encoder's latent space).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_stats import (  # noqa: E402
    auc,
    bootstrap_ci,
    bootstrap_ci2,
    churn,
    detectable_difference,
    iqm,
    performance_profile,
    prob_improvement,
)

ROOT = Path(__file__).resolve().parents[1]
ARMS = {mode: [f"loop.ppl.mode={mode}"] for mode in ("off", "naive", "ppl")}  # the preset arms and their overrides
PALETTE = ["#888888", "#e0a030", "#3070d0", "#30a060", "#c03040", "#8050b0", "#40a0b0", "#b07030"]
console = Console(width=160)


def log(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {msg}", highlight=False)


def worldsample(*args: str, log_path: Path) -> None:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    with open(log_path, "w") as out:
        rc = subprocess.call(
            [sys.executable, "-m", "services.cli.main", *args], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT
        )
    if rc != 0:
        raise SystemExit(f"`worldsample {' '.join(args[:2])} ...` failed (exit {rc}); see {log_path}")


def curve(run: Path) -> list[tuple[int, float]]:
    """(real steps, eval success) from the trainer's metrics log."""
    pts = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "eval/success_rate" in row:
            pts.append((int(row["step"]), float(row["eval/success_rate"])))
    return pts


def wall_seconds(run: Path) -> float:
    """From the trainer's first metrics row (after Ray start) to its last."""
    times = [json.loads(line)["time"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    return times[-1] - times[0]


def eval_churn(rows: list[dict]) -> tuple[float | None, float | None]:
    """rl_stats.churn of the run's evaluations after the first (which plays the behaviour-cloned start);
    the final evaluation counts only when it has the others' number of episodes."""
    evals = [(r["eval/success_rate"], r.get("eval/episodes")) for r in rows if "eval/success_rate" in r]
    if len(evals) > 2 and evals[-1][1] != evals[-2][1]:
        evals = evals[:-1]  # the final evaluation on more states (loop.final_eval_episodes)
    return churn([v for v, _ in evals[1:]])


def diagnostics(run: Path, competent: float = 0.5) -> dict[str, float | None]:
    """Mean synthetic share of learner batches (whole run, and from the first evaluation at or above
    `competent`), the human's share of online steps in each quarter of the budget,
    the world model's success head on held-out real windows (its last calibration), and the
    evaluations' churn."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    share = [(r["step"], r["batch/synthetic_share"]) for r in rows if "batch/synthetic_share" in r]
    evals = [(r["step"], r["eval/success_rate"]) for r in rows if "eval/success_rate" in r]
    t_comp = next((s for s, v in evals if v >= competent), None)
    eps = [(r["step"], r["episode/interventions"], r["episode/length"]) for r in rows if "episode/length" in r]
    budget = max((s for s, _, _ in eps), default=0)

    def human(lo: float, hi: float) -> float | None:
        sel = [(i, n) for s, i, n in eps if lo * budget < s <= hi * budget]
        return sum(i for i, _ in sel) / sum(n for _, n in sel) if sel else None

    # what the exploring policy collects: the online episodes it won with no human step, per half of the budget
    won = [(r["step"], r["episode/success"] > 0 and not r.get("episode/interventions", 0)) for r in rows
           if "episode/success" in r]

    def wins(lo: float, hi: float) -> float | None:
        sel = [w for s, w in won if lo * budget < s <= hi * budget]
        return float(np.mean(sel)) if sel else None

    last = {k: v for r in rows for k, v in r.items() if k.startswith("wm/success_")}
    mean = lambda xs: float(np.mean(xs)) if xs else None  # noqa: E731
    total = lambda key: sum(r.get(key, 0.0) for r in rows)  # noqa: E731
    written, branches = total("synth/written"), total("synth/branches")
    churn_mean, churn_fall = eval_churn(rows)
    return {
        "churn_mean": churn_mean,
        "churn_fall": churn_fall,
        "synthetic_share": mean([v for _, v in share]),
        "synthetic_share_competent": mean([v for s, v in share if t_comp is not None and s >= t_comp]),
        **{f"human_q{q + 1}": human(q / 4, (q + 1) / 4) for q in range(4)},
        "wins_h1": wins(0.0, 0.5),
        "wins_h2": wins(0.5, 1.0),
        "success_precision": last.get("wm/success_precision"),
        "success_recall": last.get("wm/success_recall"),
        # the success pool's supply: the share of written synthetic episodes that end on a predicted success
        "synthetic_successes": total("synth/successes") / written if written else None,
        # the uncertainty veto: share of imagined branches it cut short or dropped
        "vetoed": (total("synth/truncated_uncertain") + total("synth/dropped_uncertain")) / branches
        if branches else None,
    }


def shares_over_time(run: Path, bins: np.ndarray) -> dict[str, np.ndarray]:
    """Per bin of real steps: the mean synthetic share of learner batches and the human's share of
    online steps (NaN where a bin has none)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    out = {}
    picks = {
        "synthetic": lambda r: (r["batch/synthetic_share"], 1.0) if "batch/synthetic_share" in r else None,
        "human": lambda r: (r["episode/interventions"], r["episode/length"]) if "episode/length" in r else None,
    }
    for name, pick in picks.items():
        num, den = np.zeros(len(bins) - 1), np.zeros(len(bins) - 1)
        for r in rows:
            v = pick(r)
            if v is None:
                continue
            i = np.searchsorted(bins, r["step"], side="right") - 1
            if 0 <= i < len(num):
                num[i] += v[0]
                den[i] += v[1]
        out[name] = np.where(den > 0, num / np.maximum(den, 1e-12), np.nan)
    return out


def steps_to(pts: list[tuple[int, float]], threshold: float) -> int | None:
    return next((s for s, v in pts if v >= threshold), None)


def plot(results: dict, threshold: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    colours = dict(zip(results, PALETTE * 2))
    for arm, runs in results.items():
        grid = sorted({s for pts in runs.values() for s, _ in pts})
        curves = np.array([np.interp(grid, *zip(*pts)) for pts in runs.values()])
        mean = curves.mean(0)
        ax.plot(grid, 100 * mean, label=f"{arm} ({len(runs)} seeds)", color=colours.get(arm))
        if len(runs) > 1:
            ax.fill_between(grid, 100 * curves.min(0), 100 * curves.max(0), color=colours.get(arm), alpha=0.15)
    ax.axhline(100 * threshold, ls="--", lw=0.8, color="k")
    ax.set_xlabel("real environment steps")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(-2, 102)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def plot_shares(out: Path, results: dict, path: Path, bins: int = 10) -> None:
    """Synthetic share of learner batches and the human's share of online steps vs real steps, the
    mean over seeds per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget = max(s for runs in results.values() for pts in runs.values() for s, _ in pts)
    edges = np.linspace(0, budget, bins + 1)
    mid = (edges[1:] + edges[:-1]) / 2
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), dpi=120)
    colours = dict(zip(results, PALETTE * 2))
    for arm, runs in results.items():
        per = [shares_over_time(out / f"{arm}-{seed}", edges) for seed in runs]
        for ax, name in zip(axes, ("synthetic", "human")):
            with np.errstate(all="ignore"):
                ax.plot(mid, 100 * np.nanmean([p[name] for p in per], axis=0), label=arm, color=colours.get(arm))
    for ax, title in zip(axes, ("synthetic share of learner batches (%)", "human share of online steps (%)")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("real environment steps")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)


def plot_profile(results: dict, path: Path) -> None:
    """Performance profile (rliable): the share of each arm's runs whose final success is above tau,
    with a 95 % bootstrap band over runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    taus = np.linspace(0, 1, 101)
    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=120)
    rng = np.random.default_rng(0)
    for (arm, runs), colour in zip(results.items(), PALETTE * 2):
        final = np.array([pts[-1][1] for pts in runs.values()])
        boots = np.array([performance_profile(final[rng.integers(0, len(final), len(final))], taus)
                          for _ in range(1000)])
        ax.plot(100 * taus, 100 * performance_profile(final, taus), color=colour, label=f"{arm} ({len(final)} runs)")
        ax.fill_between(100 * taus, *(100 * np.percentile(boots, [2.5, 97.5], axis=0)), color=colour, alpha=0.12)
    ax.set_xlabel("final success tau (%)")
    ax.set_ylabel("runs with final success > tau (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def _iqm_ci(xs: list[float]) -> str:
    """IQM over runs with its 95 % bootstrap interval, in percent (bench/rl_stats.py)."""
    lo, hi = bootstrap_ci(xs)
    return f"{100 * iqm(xs):.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def _pct(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    return f"{100 * np.mean(xs):.0f} %" if xs else "-"


def _points(xs: list, reduce=np.mean) -> str:
    xs = [x for x in xs if x is not None]
    return f"{100 * reduce(xs):.0f}" if xs else "-"


def summarise(
    results: dict, threshold: float, budget: int, seconds: dict, diags: dict
) -> tuple[Table, list[str]]:
    table = Table(title=f"success vs real steps (threshold {100 * threshold:.0f} %, budget {budget} real steps)")
    steps_to_col = f"steps to {100 * threshold:.0f} % (per seed)"
    cols = ("arm", "success at 0", "final success", "final IQM [95 % CI]", "AUC IQM [95 % CI]", steps_to_col,
            "mean steps", "steps vs off", "synthetic share",
            "once competent", "human per quarter", "won alone, 1st / 2nd half", "success head P/R",
            "synthetic successes", "vetoed", "eval churn: mean / largest fall",
            "train s/run")
    for col in cols:
        table.add_column(col, justify="right")
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    reach = {arm: [steps_to(pts, threshold) for pts in runs.values()] for arm, runs in results.items()}
    # a seed that never reaches the threshold counts as the budget (a lower bound on its cost)
    mean_steps = {arm: float(np.mean([budget if r is None else r for r in rs])) for arm, rs in reach.items()}
    for arm, runs in results.items():
        start = np.mean([pts[0][1] for pts in runs.values()])
        final = [pts[-1][1] for pts in runs.values()]
        per_seed = ", ".join("-" if r is None else str(r) for r in reach[arm])
        unreached = sum(r is None for r in reach[arm])
        mean = f"{mean_steps[arm]:.0f}" + (f"+ ({unreached} of {len(reach[arm])} not reached)" if unreached else "")
        # fewer real steps than off to reach the threshold (negative: more); a lower bound while seeds are censored
        if arm == "off" or "off" not in mean_steps:
            vs = "-"
        else:
            vs = f"{100 * (1 - mean_steps[arm] / mean_steps['off']):.0f} % fewer"
        row = [
            arm,
            f"{100 * start:.0f} %",
            f"{100 * np.mean(final):.0f} % (sd {100 * np.std(final):.0f})",
            _iqm_ci(final),
            _iqm_ci([auc(pts, budget) for pts in runs.values()]),
            per_seed,
            mean,
            vs,
            _pct([d["synthetic_share"] for d in diags[arm].values()]),
            _pct([d["synthetic_share_competent"] for d in diags[arm].values()]),
            " / ".join(_pct([d.get(f"human_q{q}") for d in diags[arm].values()]) for q in range(1, 5)),
            " / ".join(_pct([d.get(f"wins_h{h}") for d in diags[arm].values()]) for h in (1, 2)),
            _pct([d["success_precision"] for d in diags[arm].values()])
            + " / " + _pct([d["success_recall"] for d in diags[arm].values()]),
            _pct([d.get("synthetic_successes") for d in diags[arm].values()]),
            _pct([d.get("vetoed") for d in diags[arm].values()]),
            _points([d.get("churn_mean") for d in diags[arm].values()]) + " / "
            + _points([d.get("churn_fall") for d in diags[arm].values()], np.max),
            f"{np.mean(seconds[arm]):.0f}",
        ]
        table.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    return table, md


def _ci(est: float, lo: float, hi: float) -> str:
    """An estimate and its interval, in percent."""
    return f"{100 * est:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]"


def compare(results: dict, threshold: float, budget: int) -> tuple[Table, list[str]]:
    """Each arm against the first (the baseline), with 95 % bootstrap intervals (each arm's runs
    resampled on their own): the probability that one of its runs beats one of the baseline's (final
    success, area under the curve), and how many fewer real steps it takes to the threshold (a seed that
    never reaches it counts as the budget), as a share of the baseline's mean. Last, the smallest
    difference of means the baseline's spread lets this many seeds detect (5 % test, 80 % power)."""
    arms = list(results)
    base = arms[0]

    def scores(arm: str) -> dict[str, list[float]]:
        runs = results[arm].values()
        return {"final": [pts[-1][1] for pts in runs], "auc": [auc(pts, budget) for pts in runs],
                "steps": [float(steps_to(pts, threshold) or budget) for pts in runs]}

    b = scores(base)
    fewer = lambda x, y: float(1 - np.mean(x) / np.mean(y))  # noqa: E731
    cols = ("arm", f"P(final > {base})", f"P(AUC > {base})", f"final IQM - {base} (points)",
            f"fewer steps to {100 * threshold:.0f} % than {base} (%)")
    table = Table(title=f"against {base} (95 % bootstrap intervals; an interval clear of 50 / 0 is an effect)")
    for col in cols:
        table.add_column(col, justify="right")
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for arm in arms[1:]:
        a = scores(arm)
        diff = lambda x, y: iqm(x) - iqm(y)  # noqa: E731
        row = [
            arm,
            _ci(prob_improvement(a["final"], b["final"]), *bootstrap_ci2(a["final"], b["final"], prob_improvement)),
            _ci(prob_improvement(a["auc"], b["auc"]), *bootstrap_ci2(a["auc"], b["auc"], prob_improvement)),
            _ci(diff(a["final"], b["final"]), *bootstrap_ci2(a["final"], b["final"], diff)),
            _ci(fewer(a["steps"], b["steps"]), *bootstrap_ci2(a["steps"], b["steps"], fewer)),
        ]
        table.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    n = len(b["final"])
    mde = (f"detectable with {n} seeds per arm, from {base}'s spread: final success "
           f"{100 * detectable_difference(b['final']):.0f} points, AUC {100 * detectable_difference(b['auc']):.0f} "
           f"points, steps to {100 * threshold:.0f} % {detectable_difference(b['steps']):.0f} "
           f"({100 * detectable_difference(b['steps']) / np.mean(b['steps']):.0f} % of {base}'s mean)")
    md.append("")
    md.append(mde)
    table.caption = mde
    return table, md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="state", help="configs/bench/<profile>.yaml")
    ap.add_argument("--arms", default=None, help=f"preset arms, comma-separated, from {sorted(ARMS)} (default: all "
                    "three, none when --arm names arms); the first arm is the baseline of the comparison")
    ap.add_argument("--arm", dest="custom", nargs="+", action="append", default=[], metavar="NAME [KEY=VALUE ...]",
                    help="a named arm and its own config overrides (repeatable); runs after the preset arms")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--real-steps", type=int, default=None, help="budget per run (default: the profile's)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs in parallel (each is lock-step and seeded: results do not depend on it)",
    )
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "sample_efficiency")
    ap.add_argument(
        "--summarise", action="store_true", help="only rebuild the table and plot from the runs already in --out"
    )
    ap.add_argument("--set", dest="sets", action="append", default=[], help="extra config override for every run")
    args = ap.parse_args()
    try:  # fail now, not after the runs
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("the plot needs matplotlib: .venv/bin/pip install -e '.[bench]'") from None

    profile = ROOT / "configs" / "bench" / f"{args.profile}.yaml"
    if not profile.exists():
        raise SystemExit(f"no profile {profile}")
    presets = args.arms.split(",") if args.arms is not None else ([] if args.custom else list(ARMS))
    if unknown := set(p for p in presets if p) - set(ARMS):
        raise SystemExit(f"unknown arms {sorted(unknown)}; choose from {sorted(ARMS)} or name one with --arm")
    overrides = {a: ARMS[a] for a in presets if a}
    for name, *sets_ in args.custom:
        if name in overrides or "-" in name or "/" in name:
            raise SystemExit(f"--arm {name}: the name is taken or has '-' or '/' (run directories are NAME-SEED)")
        shared = [x for x in sets_ if x.split("=", 1)[0].strip().startswith("demos.")]
        if shared:  # the demonstrations are recorded once per seed, before any arm runs
            raise SystemExit(f"--arm {name} {' '.join(shared)}: every arm of a seed trains on the same "
                             "demonstrations; set demos.* for all arms with --set, or run the arm with its own --out")
        overrides[name] = list(sets_)
    arms = list(overrides)
    if not arms:
        raise SystemExit("no arms: name presets with --arms or arms with --arm")
    seeds = [int(s) for s in args.seeds.split(",")]
    sets = list(args.sets) + ([f"loop.real_steps={args.real_steps}"] if args.real_steps else [])
    from worldsample.config import load_config
    from worldsample.errors import ConfigError

    for arm in arms:  # a profile that refuses an arm (image: no world model yet) fails now, not after the demos
        try:
            load_config(profile, [*sets, *overrides[arm]])
        except ConfigError as e:
            raise SystemExit(f"profile {args.profile}, arm {arm}: {e}") from None
    out = args.out
    if args.summarise:
        if args.arms is None and not args.custom and (out / "arms.json").exists():  # the arms the runs were made with
            arms = list(json.loads((out / "arms.json").read_text()))
        return report(out, args.threshold, arms, seeds, args.profile)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "arms.json").write_text(json.dumps(overrides, indent=1))
    common = ["--config", str(profile)] + [x for s in sets for x in ("--set", s)]

    for seed in seeds:
        demos = out / f"demos-{seed}"
        worldsample(
            "demos", "collect", "--out", str(demos), *common, "--set", f"demos.seed={1000 * seed}",
            log_path=out / f"demos-{seed}.log",
        )

    def one(seed: int, arm: str) -> None:
        run = out / f"{arm}-{seed}"
        shutil.copytree(out / f"demos-{seed}", run)
        log(f"seed {seed} arm {arm} ...")
        t0 = time.perf_counter()
        arm_sets = [x for s in overrides[arm] for x in ("--set", s)]
        worldsample("train", str(run), *common, *arm_sets, "--set", f"loop.seed={seed}",
                    "--set", f"loop.learner.seed={seed}", log_path=out / f"{arm}-{seed}.log")
        pts = curve(run)
        success = " ".join(f"{s}:{100 * v:.0f}" for s, v in pts)
        log(f"seed {seed} arm {arm}: success {success} ({time.perf_counter() - t0:.0f} s)")

    # runs are independent (own run directory, own local Ray); --jobs 2 uses both cores of a small machine
    with ThreadPoolExecutor(args.jobs) as pool:
        for f in [pool.submit(one, seed, arm) for seed in seeds for arm in arms]:
            f.result()
    report(out, args.threshold, arms, seeds, args.profile)


def report(out: Path, threshold: float, arms: list[str], seeds: list[int], profile: str) -> None:
    """Table, plot and JSON from the run directories under `out` (their metrics.jsonl)."""
    results = {
        arm: {
            seed: curve(out / f"{arm}-{seed}")
            for seed in seeds
            if (out / f"{arm}-{seed}" / "metrics.jsonl").exists()
        }
        for arm in arms
    }
    seconds = {arm: [wall_seconds(out / f"{arm}-{seed}") for seed in runs] for arm, runs in results.items()}
    budget = max(s for runs in results.values() for pts in runs.values() for s, _ in pts)
    diags = {arm: {seed: diagnostics(out / f"{arm}-{seed}") for seed in runs} for arm, runs in results.items()}
    table, md = summarise(results, threshold, budget, seconds, diags)
    console.print(table)
    if len(results) > 1:
        versus, md_versus = compare(results, threshold, budget)
        console.print(versus)
        md += ["", *md_versus]
    plot(results, threshold, out / "success_vs_steps.png")
    plot_shares(out, results, out / "shares_vs_steps.png")
    plot_profile(results, out / "profile.png")
    (out / "results.json").write_text(json.dumps({"profile": profile, "seeds": seeds, "threshold": threshold,
                                                  "curves": results, "seconds": seconds, "diagnostics": diags},
                                                 indent=1))
    (out / "table.md").write_text("\n".join(md) + "\n")
    log(f"wrote {out / 'success_vs_steps.png'}, {out / 'shares_vs_steps.png'}, {out / 'profile.png'}, "
        f"{out / 'table.md'}, {out / 'results.json'}")


if __name__ == "__main__":
    main()
