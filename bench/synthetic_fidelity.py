"""How true are a run's synthetic episodes? Each one is played again on the simulated arm from its
source state (the real episode's reset seed and recorded actions up to the branch step, then the
branch's own actions; worldsample/synth/sim_replay.py) and compared with what the world model wrote.

    MUJOCO_GL=egl .venv/bin/python bench/synthetic_fidelity.py RUN [RUN ...] [--max-episodes 300]

Per run (a lock-step `--robot sim` run with a `synthetic` group: a `ppl` or `naive` arm of
bench/sample_efficiency.py): the success labels against the arm's own (precision: of the episodes
the world model ended on a success, the share whose actions succeed on the arm; recall: of the
episodes whose actions succeed on the arm within the written steps, the share the world model
labelled), the hand's and the object's position error along the branch (mm, median over episodes,
at imagined steps 1, 5 and 10), and the same error for holding the branch point's state (the
copy-last baseline the world model must beat), also over the branches whose object the arm moved
by more than 5 mm (the pushes that matter; n of them). The synthetic group is a bounded pool: what is read
is what it still holds (the last world-model versions).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsample.evaluation.policies import run_env_config  # noqa: E402
from worldsample.sim.env import HAND, OBJECT  # noqa: E402
from worldsample.store import EpisodeStore  # noqa: E402
from worldsample.synth.sim_replay import SimReplay  # noqa: E402

STEPS = (1, 5, 10)
MOVED_MM = 5.0  # an object this far from where the branch started has been pushed


def fidelity(run: Path, max_episodes: int, seed: int = 0) -> dict:
    store = EpisodeStore(run)
    syn = store.reader("synthetic")
    recs = syn.episode_records()
    if not recs:
        raise SystemExit(f"{run}: no synthetic episodes (an `off` arm, or no world model yet)")
    rng = np.random.default_rng(seed)
    if len(recs) > max_episodes:
        recs = [recs[i] for i in sorted(rng.choice(len(recs), max_episodes, replace=False))]
    sources = {g: store.reader(g) for g in {r.source.group for r in recs}}
    keys = [k for k in ("proprio", "state") if k in syn.schema.keys]
    replay = SimReplay(run_env_config(run), keys, horizon=max(r.length for r in recs))
    pred, true = [], []
    names = ("hand", "object", "hand_copy", "object_copy", "moving", "moving_copy")
    err = {name: {k: [] for k in STEPS} for name in names}
    read = {}  # branches share source episodes: each is read once
    for rec in recs:
        src = sources[rec.source.group]
        key = (rec.source.group, rec.source.episode)
        if key not in read:
            read[key] = src.episode(rec.source.episode)
        t, data = rec.source.step, read[key]
        ep = syn.episode(rec.episode)
        seed_ = src.records[rec.source.episode].extra["seed"]
        frames, _, success, _, _ = replay.play(seed_, data["action"][:t], {k: data[k][t] for k in keys}, ep["action"])
        pred.append(bool(ep["done"][-1] and ep["success"][-1]))
        true.append(bool(success.any()))
        imagined, real, start = ep["state"][1:], frames["state"][:-1], ep["state"][0]
        for k in STEPS:
            if k <= len(imagined):
                for part, sl in (("hand", HAND), ("object", OBJECT)):
                    err[part][k].append(1000 * np.linalg.norm(imagined[k - 1, sl] - real[k - 1, sl]))
                    err[f"{part}_copy"][k].append(1000 * np.linalg.norm(start[sl] - real[k - 1, sl]))
                if err["object_copy"][k][-1] > MOVED_MM:  # the arm moved the object: the pushes that matter
                    err["moving"][k].append(err["object"][k][-1])
                    err["moving_copy"][k].append(err["object_copy"][k][-1])
    replay.close()
    pred_, true_ = np.array(pred), np.array(true)
    tp = int((pred_ & true_).sum())
    return {
        "episodes": len(recs), "predicted": int(pred_.sum()), "true": int(true_.sum()), "both": tp,
        "precision": tp / pred_.sum() if pred_.any() else None, "recall": tp / true_.sum() if true_.any() else None,
        "err": {name: {k: float(np.median(v)) if v else None for k, v in d.items()} for name, d in err.items()},
        "moving": {k: len(v) for k, v in err["moving"].items()},
    }


def _mm(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--max-episodes", type=int, default=300, help="synthetic episodes replayed per run (a sample)")
    args = ap.parse_args()
    table = Table(title="synthetic episodes replayed on the arm: labels and state error (mm, median)")
    for col in ("run", "episodes", "WM success / arm success / both", "precision", "recall",
                *(f"hand @{k} (copy)" for k in STEPS), *(f"object @{k} (copy)" for k in STEPS),
                *(f"pushed object @{k} (copy) [n]" for k in STEPS[1:])):
        table.add_column(col, justify="right")
    for run in args.runs:
        f = fidelity(run, args.max_episodes)
        e = f["err"]
        table.add_row(
            str(run), str(f["episodes"]), f"{f['predicted']} / {f['true']} / {f['both']}",
            "-" if f["precision"] is None else f"{100 * f['precision']:.0f} %",
            "-" if f["recall"] is None else f"{100 * f['recall']:.0f} %",
            *(f"{_mm(e['hand'][k])} ({_mm(e['hand_copy'][k])})" for k in STEPS),
            *(f"{_mm(e['object'][k])} ({_mm(e['object_copy'][k])})" for k in STEPS),
            *(f"{_mm(e['moving'][k])} ({_mm(e['moving_copy'][k])}) [{f['moving'][k]}]" for k in STEPS[1:]),
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
