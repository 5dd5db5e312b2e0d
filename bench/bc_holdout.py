"""How well the learner's behaviour cloning generalises across demonstrations, with and without
observation standardisation (`loop.learner.obs_norm`): leave-two-out over a run's demos.

    .venv/bin/python bench/bc_holdout.py RUN [--floors 0.05,0.2] [--steps 3000] [--noise 0]

RUN is a run directory with demonstrations (e.g. one of `bench/sample_efficiency.py`'s
`demos-<seed>` folders). For each fold, the learner's actor (LearnerConfig's defaults: its
networks, batch and optimiser) is behaviour-cloned, as the loop's pretraining does, on all demos
but two, and scored on the two left out: the mean squared error of its deterministic action
against the expert's, summed over the action's coordinates. Rows: raw observations (the baseline),
then standardised by the training demos' statistics with each std floor in `--floors`. Printed:
training and held-out error per row, and each row's held-out error over the baseline's.
`--noise` adds Gaussian noise of that size to the training observations (20 noisy copies).
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


def fold_error(train: list[dict], test: list[dict], key: str, floor: float | None, steps: int, noise: float,
               seed: int) -> tuple[float, float]:
    """(training error, held-out error) of one fold; floor None: raw observations."""
    import gymnasium as gym

    from worldsample.learner import LearnerConfig
    from worldsample.learner.sac import SACAgent

    x = np.concatenate([e[key] for e in train]).reshape(sum(len(e[key]) for e in train), -1).astype(np.float32)
    a = np.concatenate([e["action"] for e in train]).astype(np.float32)
    stats = (x.mean(0), x.std(0)) if floor is not None else None
    if noise > 0:
        rng = np.random.default_rng(seed)
        x = np.concatenate([x + noise * rng.standard_normal(x.shape).astype(np.float32) for _ in range(20)])
        a = np.concatenate([a] * 20)
    cfg = LearnerConfig(obs_keys=[key], seed=seed, obs_norm="off" if floor is None else "all",
                        obs_norm_min_std=floor or 0.05)
    agent = SACAgent(cfg, x.shape[1], gym.spaces.Box(-1.0, 1.0, (a.shape[1],), np.float32), obs_stats=stats)
    try:
        train_err = agent.bc_pretrain(x, a, steps)["bc_mse"]
        xt = np.concatenate([e[key] for e in test]).astype(np.float32)
        at = np.concatenate([e["action"] for e in test])
        pred = np.stack([agent.act({key: o}) for o in xt])
        return float(train_err), float(((pred - at) ** 2).sum(-1).mean())
    finally:
        agent.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--key", default="state", help="the observation key the learner reads")
    ap.add_argument("--floors", default="0.05,0.2", help="std floors of the standardised rows")
    ap.add_argument("--steps", type=int, default=3000, help="behaviour-cloning steps (LearnerConfig's default)")
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    reader = EpisodeStore(args.run).reader("demo", keys=[args.key])
    eps = [reader.episode(e) for e in range(reader.num_episodes)]
    if len(eps) < 4:
        raise SystemExit(f"{args.run}: {len(eps)} demonstrations; leave-two-out needs at least 4")
    folds = [(i, i + 1) for i in range(0, len(eps) - 1, 2)]
    rows = [None, *(float(f) for f in args.floors.split(",") if f)]
    table = Table(title=f"behaviour cloning, leave-two-out over {len(eps)} demos ({len(folds)} folds)")
    for col in ("observations", "training error", "held-out error per fold", "held-out", "vs raw"):
        table.add_column(col)
    base = None
    for floor in rows:
        errs = [fold_error([e for i, e in enumerate(eps) if i not in f], [eps[i] for i in f], args.key, floor,
                           args.steps, args.noise, args.seed) for f in folds]
        held = float(np.mean([h for _, h in errs]))
        base = held if base is None else base
        name = "raw" if floor is None else f"standardised, std >= {floor}"
        table.add_row(name, f"{np.mean([t for t, _ in errs]):.3f}", " ".join(f"{h:.3f}" for _, h in errs),
                      f"{held:.3f}", f"{held / base:.2f}x")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
