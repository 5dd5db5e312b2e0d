"""`worldsample eval policies`: score policy versions in the run's world model and, for comparison,
on the simulated arm; rank agreement (Pearson, Spearman, MMRV), the recommended version, a JSON
report under RUN/reports/ (the dashboard's policies view lists it and shows its rows) and a plot.

Report rows (`policies`): one per version with the real figures (`policy` "v7") and one with the
imagined ones (`policy` "v7 (world model)"), in the dashboard's comparison-table fields.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from worldsample.atomic import atomic_write_text
from worldsample.errors import ConfigError
from worldsample.evaluation.imagined import ImaginedScore, load_world_model, score_policy
from worldsample.evaluation.metrics import ranking_report
from worldsample.evaluation.real import RealScore, eval_env, score_real
from worldsample.evaluation.recommend import recommend
from worldsample.evaluation.starts import Starts, eval_seed0, heldout_starts, sim_starts
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry, load_actor

SCORE_FIELDS = ("success_rate", "success_prob", "mean_return")  # imagined scores that can rank policies


def parse_versions(text: str | None, existing: list[int], default_max: int = 10) -> list[int]:
    """"v3,v7" or "3,7" -> [3, 7]; "all" -> every version; None -> up to `default_max` versions
    spread evenly over the registry, the last one always in."""
    if not existing:
        raise ConfigError("no policy published in this run yet")
    if text is None:
        if len(existing) <= default_max:
            return list(existing)
        idx = np.unique(np.round(np.linspace(0, len(existing) - 1, default_max)).astype(int))
        return [existing[i] for i in idx]
    if text.strip() == "all":
        return list(existing)
    out = []
    for part in text.split(","):
        p = part.strip().lower().removeprefix("v")
        if not p:
            continue
        if not p.isdigit():
            raise ConfigError(f"--policies takes versions like v3,v7 or 3,7 (or all); got {part.strip()!r}")
        v = int(p)
        if v not in existing:
            raise ConfigError(f"policy version {v} is not in the registry (it has v{existing[0]}..v{existing[-1]})")
        if v not in out:
            out.append(v)
    if not out:
        raise ConfigError("--policies names no version")
    return out


def run_env_config(run_dir: str | Path):
    """The simulated arm of the run's own config (RUN/config.yaml), else the default arm."""
    from worldsample.config import saved_config
    from worldsample.sim.config import SimArmConfig

    cfg = saved_config(run_dir)
    return cfg.env if cfg is not None else SimArmConfig()


def make_starts(run_dir, model, kind: str, n: int, env_cfg, seed0: int | None = None) -> Starts:
    """`kind` heldout, sim, or auto: held-out episodes when there are `n` of them, else the sim."""
    keys = [*model.cfg.image_keys, *model.cfg.vector_keys]
    if kind == "auto":
        try:
            got = heldout_starts(run_dir, keys, n, model.cfg.train.holdout_every)
            if len(got) >= n:
                return got
        except ConfigError:
            pass
        return sim_starts(env_cfg, keys, n, seed0)
    if kind == "heldout":
        return heldout_starts(run_dir, keys, n, model.cfg.train.holdout_every)
    if kind == "sim":
        return sim_starts(env_cfg, keys, n, seed0)
    raise ConfigError(f"starts must be heldout, sim or auto, got {kind!r}")


def evaluate_policies(
    run_dir: str | Path,
    versions: list[int],
    real: bool = True,
    starts: str = "heldout",
    n_starts: int = 20,
    horizon: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    episodes: int = 20,
    wm_version: int | None = None,
    env_cfg=None,
    on_progress: Callable[[str], None] | None = None,
    real_scores: dict[int, RealScore] | None = None,
) -> dict:
    """The report (a JSON-ready dict) of imagined and, with `real`, simulated-arm scores. `real_scores`
    (version -> RealScore) are used instead of running those versions on the arm again (a benchmark
    that compares several world models on the same checkpoints measures the arm once)."""
    t0 = time.perf_counter()
    say = on_progress or (lambda _m: None)
    env_cfg = env_cfg if env_cfg is not None else run_env_config(run_dir)
    horizon = horizon or env_cfg.max_episode_steps
    model, wm_v = load_world_model(run_dir, wm_version)
    st = make_starts(run_dir, model, starts, n_starts, env_cfg)
    imagined: dict[int, ImaginedScore] = {}
    given = dict(real_scores or {})
    real_scores = {v: given[v] for v in versions if v in given} if real else {}
    env = eval_env(env_cfg) if real and any(v not in real_scores for v in versions) else None
    try:
        for v in versions:
            actor = load_actor(run_dir, v)
            say(f"v{v}: imagining {len(st)} starts")
            imagined[v] = score_policy(model, actor, st, horizon, samples=samples, seed=seed, wm_version=wm_v)
            if real and v not in real_scores:
                say(f"v{v}: {episodes} episodes on the simulated arm")
                real_scores[v] = score_real(actor, env_cfg, episodes, env=env)
    finally:
        if env is not None:
            env.close()
    existing = PolicyRegistry(run_dir).versions()
    rec = recommend({v: s.key for v, s in imagined.items()}, existing)
    report: dict = {"kind": "policy_eval"}
    if real and len(versions) >= 1:
        R = [real_scores[v].success_rate for v in versions]
        metrics = {f: ranking_report([getattr(imagined[v], f) for v in versions], R) for f in SCORE_FIELDS}
        best = max(versions, key=lambda v: (real_scores[v].success_rate, v))
        last = max(versions)
        report |= {k: metrics["success_rate"][k] for k in ("pearson", "spearman", "mmrv", "mmrv_constant")}
        report |= {
            "recommended": f"v{rec}",
            "recommended_real_success": real_scores[rec].success_rate if rec in real_scores else None,
            "best_real": f"v{best}",
            "best_real_success": real_scores[best].success_rate,
            "last": f"v{last}",
            "last_real_success": real_scores[last].success_rate,
            "metrics": metrics,
        }
    else:
        report["recommended"] = f"v{rec}"
    report |= {
        "world_model": f"v{wm_v}",
        "generator": model.cfg.generator.kind,
        "starts": starts,
        "n_starts": len(st),
        "start_origin": st.origin,
        "horizon": horizon,
        "samples": next(iter(imagined.values())).samples,
        "seed": seed,
        "real_episodes": next(iter(real_scores.values())).episodes if real_scores else 0,
        "real_seed0": eval_seed0() if real else None,
        "created": time.time(),
        "seconds": time.perf_counter() - t0,
        "policies": _rows(versions, imagined, real_scores),
        "imagined": {f"v{v}": s.to_dict() for v, s in imagined.items()},
        "real": {f"v{v}": s.to_dict() for v, s in real_scores.items()},
    }
    return report


def _rows(versions, imagined: dict[int, ImaginedScore], real: dict[int, RealScore]) -> list[dict]:
    rows = []
    for v in versions:
        if v in real:
            r = real[v]
            rows.append({"policy": f"v{v}", "episodes": r.episodes, "success_rate": r.success_rate,
                         "mean_return": r.mean_return, "mean_length": r.mean_length})
        s = imagined[v]
        rows.append({"policy": f"v{v} (world model)", "episodes": s.starts * s.samples, "success_rate": s.success_rate,
                     "mean_return": s.mean_return, "mean_length": s.mean_length, "success_prob": s.success_prob})
    return rows


def _clean(obj):
    """NaN and inf to None: the report is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_report(run_dir: str | Path, report: dict, name: str) -> Path:
    """RUN/reports/<name>.json, written whole (temp file + rename)."""
    path = RunFiles.of(run_dir).reports / f"{name}.json"
    atomic_write_text(path, json.dumps(_clean(report), indent=1, allow_nan=False))
    return path


def report_name(prefix: str, run_dir: str | Path | None = None) -> str:
    """<prefix>_<date>-<time>; with `run_dir`, <...>-2, -3 and so on when that report exists already
    (two reports in one second), so that a new report never replaces an earlier one."""
    name = f"{prefix}_{time.strftime('%Y%m%d-%H%M%S')}"
    if run_dir is None:
        return name
    reports, n, free = RunFiles.of(run_dir).reports, 1, name
    while (reports / f"{free}.json").exists():
        n += 1
        free = f"{name}-{n}"
    return free


def plot_scatter(report: dict, path: Path) -> Path | None:
    """Imagined vs real success, one point per version; None when matplotlib is missing or there
    is nothing real to compare with."""
    if not report.get("real"):
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = list(report["real"])
    x = [report["imagined"][n]["success_rate"] for n in names]
    y = [report["real"][n]["success_rate"] for n in names]
    fig, ax = plt.subplots(figsize=(5, 4.5), dpi=100)
    ax.plot([0, 1], [0, 1], color="0.8", lw=1, zorder=0)
    ax.scatter(x, y, color="tab:blue")
    for n, xi, yi in zip(names, x, y, strict=True):
        mark = " *" if n == report.get("recommended") else ""
        ax.annotate(n + mark, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    ax.set_title(f"world model {report['world_model']} ({report['generator']}): r {fmt(report.get('pearson'))}, "
                 f"rho {fmt(report.get('spearman'))}, MMRV {fmt(report.get('mmrv'))}", fontsize=9)
    ax.set_xlabel("imagined success")
    ax.set_ylabel("success on the simulated arm")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
