"""The state profile's world model on a finished run's data: held-out state error against copying the
last state, per horizon and per part of the state (hand, object, goal, ...), for the loop's default
model and any variant, trained the way the loop trains it (one round on the demonstrations, then
continual rounds on demonstrations + real episodes).

    .venv/bin/python bench/world_model_state.py RUN [RUN ...]                     # default vs the old model
    .venv/bin/python bench/world_model_state.py RUN --variant wide dynamics.width=256

RUN is a run directory with `demo` and `real` groups (e.g. an arm of bench/sample_efficiency.py); its
store is copied, never written. Held out: the real episodes the world model never trains on
(`train.holdout_every`). Variants are overrides of `loop.world_model` (dotted keys, YAML values).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsample.loop.config import LoopConfig  # noqa: E402
from worldsample.loop.world_model import state_parts  # noqa: E402
from worldsample.store import EpisodeStore  # noqa: E402
from worldsample.world_model import checkpoint  # noqa: E402
from worldsample.world_model.config import WorldModelConfig  # noqa: E402
from worldsample.world_model.data import WindowSource  # noqa: E402
from worldsample.world_model.evaluate import evaluate_vectors  # noqa: E402
from worldsample.world_model.modes import fit_to_store, train_run  # noqa: E402
from worldsample.world_model.train import cache_keys  # noqa: E402
from worldsample.yamlconfig import apply_overrides  # noqa: E402

# the loop's state model before 2026-12-05: an MLP encoder to 32 latents on a 4x4 grid, convolutions, raw quaternions
OLD = ["quaternions={}", "autoencoder.vector_identity=false", "autoencoder.vector_grid=4"]
HORIZONS = [1, 8]
PARTS = ("state", "hand", "gripper", "object", "object_rotation", "previous_frame", "goal")  # the table's columns
console = Console(width=340)


def variant(overrides: list[str]) -> WorldModelConfig:
    return WorldModelConfig.model_validate(apply_overrides(LoopConfig().world_model.model_dump(), overrides))


def measure(run: Path, cfg: WorldModelConfig, rounds: int) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(run / "store", work / "store")
        store = EpisodeStore(work)
        fitted = fit_to_store(cfg, store, "demo", images=False)
        t0 = time.perf_counter()
        train_run(work, fitted, "demo")
        for _ in range(rounds):
            train_run(work, fitted, "loop")
        seconds = time.perf_counter() - t0
        model, _ = checkpoint.load(work / "world_model")
        source = WindowSource(store, {"real": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                              split="heldout")
        return evaluate_vectors(model, source, HORIZONS, parts=state_parts(model.cfg)), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3, help="continual rounds after the first (the loop: one per "
                    "wm_every_episodes)")
    ap.add_argument("--variant", nargs="+", action="append", default=[], metavar="NAME [KEY=VALUE ...]")
    ap.add_argument("--no-old", action="store_true", help="leave out the old model (its encoder takes minutes)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    variants = {"default": []} | ({} if args.no_old else {"old (encoder, conv)": OLD})
    variants |= {name: list(kv) for name, *kv in args.variant}
    table = Table(title="held-out state RMSE / copying the last state's (ratio; the last step's change "
                  "extrapolated, as a ratio to copying), per horizon")
    for col in ("run", "model", "train s", *(f"{part} @{h}" for part in PARTS for h in HORIZONS)):
        table.add_column(col, justify="right")
    for run in args.runs:
        for name, overrides in variants.items():
            rep, seconds = measure(run, variant(overrides), args.rounds)
            cells = []
            for part in PARTS:
                for h in HORIZONS:
                    row = rep["horizons"][str(h)]
                    m, c, v = row[f"rmse_{part}"], row[f"rmse_copy_{part}"], row.get(f"rmse_velocity_{part}")
                    steady = f"; constant velocity {v / c:.2f}x" if v is not None and c > 0 else ""  # history 1: none
                    cells.append(f"{m:.4f}/{c:.4f} ({m / c:.2f}x{steady})" if c > 0 else f"{m:.4f}/0")
            table.add_row(run.name, name, f"{seconds:.0f}", *cells)
            ratios = " / ".join(f"{r['rmse_state'] / r['rmse_copy_state']:.2f}x"
                                for r in (rep["horizons"][str(h)] for h in HORIZONS))
            console.print(f"{run.name} {name}: {rep['windows']} held-out windows, {seconds:.0f} s, state error "
                          f"{ratios} copying's at {' / '.join(map(str, HORIZONS))} steps", highlight=False)
    console.print(table)


if __name__ == "__main__":
    main()
