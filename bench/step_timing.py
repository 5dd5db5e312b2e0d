"""How regular a store's recorded steps are: the hand's change in each real step regressed on the
step's action and the previous step's change (least squares over every real step of the run), and the
share of moving steps whose change departs from that fit by more than half of it along the fit's
direction ("glitches": a step that held zero or two physics steps shows as about -1 or +1).

    .venv/bin/python bench/step_timing.py RUN [RUN ...]

Lock-step runs (the benchmark's) leave only contacts with the object; over DDS, an arm whose physics
runs on its own clock beside the bridge's (`sim.physics: clock`) adds bursts while the clocks are in
phase. The state profile's layout: hand at 0:3, the previous frame's hand at 18:21.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldsample.store import EpisodeStore  # noqa: E402

MOVING = 0.003  # metres: a step the fit expects to move at least this far


def measure(run: Path) -> dict:
    reader = EpisodeStore(run).reader("real")
    x, y, episode = [], [], []
    for e in range(reader.num_episodes):
        ep = reader.episode(e)
        state, action = np.asarray(ep["state"], np.float64), np.asarray(ep["action"], np.float64)
        change = state[1:, :3] - state[:-1, :3]
        previous = state[:-1, :3] - state[:-1, 18:21]
        x.append(np.hstack([action[:-1, :3], previous, np.ones((len(change), 1))]))
        y.append(change)
        episode.append(np.full(len(change), e))
    x, y, episode = np.vstack(x), np.vstack(y), np.concatenate(episode)
    w, *_ = np.linalg.lstsq(x, y, rcond=None)
    fit = x @ w
    moving = (fit**2).sum(1) > MOVING**2
    along = ((y - fit) * fit).sum(1) / np.maximum((fit**2).sum(1), 1e-12)
    glitch = moving & (np.abs(along) > 0.5)
    return {
        "steps": len(y),
        "r2": 1 - (y - fit).var() / y.var(),
        "glitches": glitch.sum() / max(moving.sum(), 1),
        "per_episode": [int(glitch[episode == e].sum()) for e in range(reader.num_episodes)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    table = Table(title="recorded steps against a linear fit of the hand's change")
    for col in ("run", "real steps", "R^2", "glitches", "glitches per episode, in order"):
        table.add_column(col)
    for run in args.runs:
        m = measure(run)
        table.add_row(str(run), str(m["steps"]), f"{m['r2']:.3f}", f"{100 * m['glitches']:.1f} %",
                      " ".join(map(str, m["per_episode"])))
    Console(width=240).print(table)


if __name__ == "__main__":
    main()
