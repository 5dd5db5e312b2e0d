"""Per-tick latency of the bridge's Best-of-N search against the base policy, in the same run, on
ONE CPU core (the process pinned, torch and onnxruntime on one thread).

    .venv/bin/python bench/search_latency.py                       # N in 1,4,8,16 x H in 1,5,10
    .venv/bin/python bench/search_latency.py --n 8 --horizons 5 --ticks 500 --torch --out lat.json
    .venv/bin/python bench/search_latency.py --wm dynamics.predict=first   # member 0 alone

The world model is the loop's (LoopConfig().world_model: vectors only, `state` 39, regression
generator, history 3, two members and their mean as the step; `--wm` overrides it), the policy the
learner's export (numpy MLP 128x128, LayerNorm, stochastic, reading `state`), both with random
weights (the cost does not depend on them) and saved as the trainer saves them, so the world
model's ONNX export is the one checkpoint.save writes. The success and done thresholds are set to
0.9999 so that no imagined row ends early: every tick pays for the whole horizon (the worst case).
Timed per tick, with no time budget: the base policy (`PolicySource.act`, what the bridge runs without
search) and `Searcher.act` + `record` (what the
bridge runs with `episode.search`), on a fresh random state each tick, a new episode every 50
ticks. `--torch` also times the offline search (worldsample/evaluation/search.py's BestOfN, torch)
on the same model and policy. Numbers from a loaded machine are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn, ticks: int, warmup: int, episode: int = 50, reset=None) -> dict:
    rng = np.random.default_rng(0)
    obs = [{"state": rng.normal(0, 0.5, 39).astype(np.float32)} for _ in range(ticks + warmup)]
    ns = np.empty(ticks, np.int64)
    for i, o in enumerate(obs):
        if reset is not None and i % episode == 0:
            reset(o)
        t0 = time.perf_counter_ns()
        fn(o)
        if i >= warmup:
            ns[i - warmup] = time.perf_counter_ns() - t0
    ms = ns / 1e6
    return {"p50": float(np.median(ms)), "p90": float(np.percentile(ms, 90)), "p99": float(np.percentile(ms, 99)),
            "mean": float(ms.mean()), "ticks": ticks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1,4,8,16", help="candidates per tick, comma-separated")
    ap.add_argument("--horizons", default="1,5,10", help="imagined steps, comma-separated")
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--torch", action="store_true", help="also time the offline (torch) search")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--wm", nargs="*", default=[], metavar="KEY=VALUE",
                    help="overrides of the loop's world model, e.g. dynamics.predict=first")
    args = ap.parse_args()

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import torch
    from rich.console import Console
    from rich.table import Table

    from robot_bridge.core.policy_source import PolicySource
    from robot_bridge.core.search import Searcher
    from worldsample.loop.config import LoopConfig
    from worldsample.paths import RunFiles
    from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry
    from worldsample.world_model import checkpoint
    from worldsample.world_model.config import WorldModelConfig
    from worldsample.world_model.model import WorldModel
    from worldsample.world_model.onnx_model import OnnxWorldModel
    from worldsample.yamlconfig import apply_overrides

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    cfg = WorldModelConfig.model_validate(apply_overrides(LoopConfig().world_model.model_dump(), args.wm))
    cfg.heads.success_threshold = cfg.heads.done_threshold = 0.9999
    torch.manual_seed(0)
    model = WorldModel(cfg).eval()
    pcfg = PolicyConfig(obs=[ObsInput(key="state", dim=39)], action_dim=4, hidden=[128, 128], action_low=[-1] * 4,
                        action_high=[1] * 4, layer_norm=True, stochastic=True)
    tensors = {k: rng.normal(0, 0.1, s).astype(np.float32) for k, s in pcfg.tensor_shapes().items()}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        t0 = time.perf_counter()
        vdir = checkpoint.save(RunFiles.of(run).world_model, model).parent
        export_s = time.perf_counter() - t0
        PolicyRegistry(run).publish(pcfg, tensors)
        src = PolicySource(run, {"state": (39,)}, 4)
        assert src.refresh(), src.error
        hold = np.zeros(4, np.float32)
        base = timed(lambda o: src.act(o, hold), args.ticks, args.warmup)
        rows.append({"what": "base policy (numpy MLP)", "n": None, "horizon": None, **base})
        wm = OnnxWorldModel(vdir)
        for n in [int(x) for x in args.n.split(",")]:
            for h in [int(x) for x in args.horizons.split(",")]:
                s = Searcher(wm, src.actor, n=n, horizon=h, seed=0)
                s.warm_up({"state": np.zeros(39, np.float32)})

                def tick(o, s=s):
                    s.record(o, s.act(o))

                fig = timed(tick, args.ticks, args.warmup, reset=lambda o, s=s: s.reset())
                assert s.counts.fallbacks == 0 and s.counts.searched == args.ticks + args.warmup
                rows.append({"what": "search, onnxruntime", "n": n, "horizon": h, **fig})
                if args.torch:
                    from worldsample.evaluation.search import BestOfN

                    off = BestOfN(model, src.actor, n=n, horizon=h, seed=0)
                    rows.append({"what": "offline search, torch", "n": n, "horizon": h,
                                 **timed(off.act, args.ticks, args.warmup, reset=off.reset)})

    table = Table(title=f"per-tick latency on one core, {args.ticks} ticks each (ms); world model export "
                        f"{export_s:.1f} s")
    for col in ("what", "N", "H", "p50", "p90", "p99", "x base (p50)", "per imagined step (p50 / H)"):
        table.add_column(col, justify="right" if col not in ("what",) else "left")
    for r in rows:
        step = f"{r['p50'] / r['horizon']:.3f}" if r["horizon"] else ""
        table.add_row(r["what"], str(r["n"] or ""), str(r["horizon"] or ""), f"{r['p50']:.3f}", f"{r['p90']:.3f}",
                      f"{r['p99']:.3f}", f"{r['p50'] / base['p50']:.1f}", step)
    Console(width=150).print(table)
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "export_s": export_s, "world_model": cfg.model_dump(mode="json"),
                                        "policy": pcfg.model_dump(mode="json")}, indent=1))


if __name__ == "__main__":
    main()
