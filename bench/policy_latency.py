"""Per-step latency of the robot-side policy on ONE CPU core, as the bridge runs it.

    .venv/bin/python bench/policy_latency.py                      # 64x64, one and two cameras
    .venv/bin/python bench/policy_latency.py --size 84 --strides 2,1,1,1 --steps 5000 --out lat.json

Each pixel policy (random weights: the cost does not depend on them) is published into a temp run
with `publish_vision_policy` and loaded by the bridge's own `PolicySource`, which runs
`policy.onnx` with onnxruntime on one thread; the process is pinned to one core first. Timed:
`PolicySource.act(obs)` per step (frames in, action out: encoder + actor + the feed copies).
Baseline: the numpy state MLP over proprio + the 39-dim state, loaded the same way. Goal (issue 11):
p50 under 5 ms for one 64x64 camera. Numbers from a loaded machine are upper bounds.
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


def pin_one_core(core: int | None) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    core = cpus[0] if core is None else core
    os.sched_setaffinity(0, {core})
    return core


def timed(fn, steps: int, warmup: int) -> dict:
    for _ in range(warmup):
        fn()
    ns = np.empty(steps, np.int64)
    for i in range(steps):
        t0 = time.perf_counter_ns()
        fn()
        ns[i] = time.perf_counter_ns() - t0
    ms = ns / 1e6
    return {"p50": float(np.median(ms)), "p90": float(np.percentile(ms, 90)), "p99": float(np.percentile(ms, 99)),
            "mean": float(ms.mean()), "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=64, help="frame height = width")
    ap.add_argument("--camera-sets", default="corner;corner,gripperPOV", help="';'-separated camera lists")
    ap.add_argument("--latent", type=int, default=50)
    ap.add_argument("--channels", default="32,32,32,32")
    ap.add_argument("--strides", default="2,2,1,1")
    ap.add_argument("--hidden", default="256,256")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--core", type=int, default=None, help="CPU to pin to (default: the first allowed)")
    ap.add_argument("--torch", action="store_true", help="also time the same module in torch (1 thread)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()

    core = pin_one_core(args.core)
    import torch
    from rich.console import Console
    from rich.table import Table

    from robot_bridge.core.policy_source import PolicySource
    from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry
    from worldsample.policy.onnx_export import VisionPolicy, publish_vision_policy
    from worldsample.vision import Encoder, EncoderConfig

    torch.set_num_threads(1)
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    hidden, rng = ints(args.hidden), np.random.default_rng(0)

    def actor_config(obs: list[ObsInput]) -> PolicyConfig:  # as the SAC export makes it
        return PolicyConfig(obs=obs, action_dim=4, hidden=hidden, action_low=[-1] * 4, action_high=[1] * 4,
                            layer_norm=True, stochastic=True)

    def random_tensors(cfg: PolicyConfig) -> dict[str, np.ndarray]:
        return {k: rng.normal(0, 0.05, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()}

    rows: list[dict] = []
    hold = np.zeros(4, np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        state_cfg = actor_config([ObsInput(key="proprio", dim=4), ObsInput(key="state", dim=39)])
        run = Path(tmp) / "state"
        PolicyRegistry(run).publish(state_cfg, random_tensors(state_cfg))
        src = PolicySource(run, {"proprio": (4,), "state": (39,)}, 4)
        assert src.refresh(), src.error
        obs = {"proprio": np.zeros(4, np.float32), "state": np.zeros(39, np.float32)}
        rows.append({"policy": "state MLP (numpy)", "runtime": "numpy",
                     **timed(lambda: src.act(obs, hold), args.steps, args.warmup)})

        for cams in [c.split(",") for c in args.camera_sets.split(";")]:
            enc = Encoder(EncoderConfig(cameras=cams, height=args.size, width=args.size, latent_dim=args.latent,
                                        channels=ints(args.channels), strides=ints(args.strides))).eval()
            cfg = actor_config([ObsInput(key="latent", dim=args.latent), ObsInput(key="proprio", dim=4)])
            tensors = random_tensors(cfg)
            run = Path(tmp) / "_".join(cams)
            publish_vision_policy(run, enc, cfg, tensors)
            shapes = {f"image_{c}": (args.size, args.size, 3) for c in cams} | {"proprio": (4,)}
            src = PolicySource(run, shapes, 4)
            assert src.refresh(), src.error
            obs = {k: rng.integers(0, 256, s, dtype=np.uint8) for k, s in shapes.items() if k.startswith("image_")}
            obs["proprio"] = np.zeros(4, np.float32)
            name = f"{'+'.join(cams)} {args.size}x{args.size} encoder + actor"
            rows.append({"policy": name, "runtime": "onnxruntime",
                         **timed(lambda src=src, obs=obs: src.act(obs, hold), args.steps, args.warmup)})
            if args.torch:
                module = VisionPolicy(enc, cfg, tensors, "latent").eval()
                inputs = [torch.from_numpy(obs[f"image_{c}"])[None] for c in cams] + [torch.zeros(1, 4)]

                def run_torch(module=module, inputs=inputs):
                    with torch.no_grad():
                        return module(*inputs)

                rows.append({"policy": name, "runtime": "torch", **timed(run_torch, args.steps, args.warmup)})

    import onnxruntime

    table = Table(title=f"policy step latency, ms, one core (cpu {core}), {args.steps} steps; "
                        f"encoder channels {args.channels} strides {args.strides}, latent {args.latent}")
    for col in ("policy", "runtime", "p50", "p90", "p99", "mean"):
        table.add_column(col, justify="left" if col in ("policy", "runtime") else "right")
    for r in rows:
        table.add_row(r["policy"], r["runtime"], *(f"{r[k]:.3f}" for k in ("p50", "p90", "p99", "mean")))
    Console(width=140).print(table)
    one = next((r for r in rows if r["runtime"] == "onnxruntime"), None)
    if one is not None:
        print(f"goal p50 < 5 ms for one camera: {'met' if one['p50'] < 5.0 else 'NOT met'} ({one['p50']:.2f} ms); "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.out:
        meta = {"core": core, "load_avg": os.getloadavg(), "onnxruntime": onnxruntime.__version__,
                "torch": torch.__version__, "args": {k: str(v) for k, v in vars(args).items()}}
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
