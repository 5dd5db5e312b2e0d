"""Episode-store throughput against plain in-RAM numpy arrays measured in the same run.

    .venv/bin/python bench/store.py [--episodes 200] [--length 100]

Data: two 64x64 RGB cameras plus 4-d proprioception and a 4-d action per step. Images are
procedural (a moving blob on a textured background with sensor noise), so they compress
about like rendered frames rather than like random bytes.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from worldsample.store import EpisodeStore, GroupSampler, GroupSchema, KeySpec
from worldsample.store.verify import dir_size

CAMS = ("front", "wrist")
H = W = 64
BATCH = 256


def make_episode(rng: np.random.Generator, length: int) -> dict[str, np.ndarray]:
    yy, xx = np.mgrid[0:H, 0:W]
    background = ((xx // 8 + yy // 8) % 2 * 40 + 60).astype(np.float32)
    path = np.cumsum(rng.normal(0, 1.0, (length, 2)), axis=0) + rng.uniform(16, 48, 2)
    ep = {}
    for c, cam in enumerate(CAMS):
        dx = xx[None] - path[:, 0, None, None] - 4 * c
        dy = yy[None] - path[:, 1, None, None]
        blob = np.exp(-(dx**2 + dy**2) / 40.0)
        img = background[None] + 150 * blob + rng.normal(0, 3, (length, H, W))
        rgb = np.stack([img, img * 0.8, img * 0.6], axis=-1)
        ep[f"image_{cam}"] = np.clip(rgb, 0, 255).astype(np.uint8)
    ep["proprio"] = rng.normal(size=(length, 4)).astype(np.float32)
    ep["action"] = rng.uniform(-1, 1, (length, 4)).astype(np.float32)
    ep["reward"] = rng.uniform(0, 1, length).astype(np.float32)
    ep["done"] = np.zeros(length, bool)
    return ep


def schema() -> GroupSchema:
    obs = {f"image_{c}": KeySpec(dtype="uint8", shape=(H, W, 3), kind="image", camera=c) for c in CAMS}
    obs["proprio"] = KeySpec(dtype="float32", shape=(4,), finite=True)
    return GroupSchema.build(obs, action_dim=4)


def timeit(fn, reps: int) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def interleaved(fns: dict, reps: int) -> dict[str, float]:
    """Median seconds per call, alternating the contenders so machine noise hits them alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(reps):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    episodes = [make_episode(rng, args.length) for _ in range(args.episodes)]
    n_steps = args.episodes * args.length
    step_bytes = sum(v[0].nbytes for v in episodes[0].values())
    console = Console()
    console.print(f"{args.episodes} episodes x {args.length} steps, {step_bytes / 1024:.1f} KiB per step")

    tmp = Path(tempfile.mkdtemp(prefix="ws-bench-"))
    try:
        # -- append ------------------------------------------------------------------------
        keys = list(episodes[0])
        ram = {k: np.empty((n_steps, *episodes[0][k].shape[1:]), episodes[0][k].dtype) for k in keys}
        t0 = time.perf_counter()
        i = 0
        for ep in episodes:
            for t in range(args.length):
                for k in keys:
                    ram[k][i] = ep[k][t]
                i += 1
        t_ram_append = time.perf_counter() - t0

        store = EpisodeStore(tmp, create=True)
        store.ensure_group("demo", schema())
        t0 = time.perf_counter()
        with store.writer("demo") as w:
            for ep in episodes:
                b = w.begin_episode()
                for t in range(args.length):
                    b.add_step({k: v[t] for k, v in ep.items()})
                b.commit()
        t_store_append = time.perf_counter() - t0
        disk = dir_size(store.root)

        # -- cold: open a reader and load everything from disk; uncached random batches -------
        t0 = time.perf_counter()
        reader = store.reader("demo")
        t_cold_load = time.perf_counter() - t0
        uncached = store.reader("demo", cache=False)
        arrays = {k: uncached._arrays[k] for k in ("image_front", "image_wrist", "proprio", "action", "reward")}
        ends = [(r.start, r.length) for r in uncached.episode_records()]

        def zarr_batch():
            picks = rng.integers(0, len(ends), BATCH)
            rows = np.array([ends[p][0] + rng.integers(0, ends[p][1] - 1) for p in picks])
            rows.sort()
            for a in arrays.values():
                a.get_orthogonal_selection((rows,))
                a.get_orthogonal_selection((rows + 1,))

        t_zarr_batch = timeit(zarr_batch, 3)

        # -- cached sampling vs numpy ----------------------------------------------------------
        sampler = GroupSampler(reader)

        def numpy_batch():
            idx = rng.integers(0, n_steps - 1, BATCH)
            out = {}
            for k in ("image_front", "image_wrist", "proprio"):
                out[k] = ram[k][idx]
                out["next_" + k] = ram[k][idx + 1]
            out["action"], out["reward"], out["done"] = ram["action"][idx], ram["reward"][idx], ram["done"][idx]
            return out

        t = interleaved(
            {
                "numpy": numpy_batch,
                "store": lambda: sampler.transitions(rng, BATCH),
                "nstep": lambda: sampler.nstep(rng, BATCH, 3, 0.97),
                "windows": lambda: sampler.windows(rng, 32, 8, keys=["image_front", "image_wrist", "action"]),
            },
            args.reps,
        )
        t_numpy, t_store, t_nstep, t_windows = t["numpy"], t["store"], t["nstep"], t["windows"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    mb = n_steps * step_bytes / 2**20
    table = Table(title="episode store vs in-RAM numpy (same run)")
    for col in ("measure", "store", "numpy (upper limit)", "store / numpy"):
        table.add_column(col, justify="right" if col != "measure" else "left")
    table.add_row("append, steps/s", f"{n_steps / t_store_append:,.0f}", f"{n_steps / t_ram_append:,.0f}",
                  f"{t_ram_append / t_store_append:.2f}x")
    table.add_row("append, MiB/s (raw)", f"{mb / t_store_append:,.0f}", f"{mb / t_ram_append:,.0f}", "")
    table.add_row("sample 256 transitions, batches/s (cached)", f"{1 / t_store:,.0f}", f"{1 / t_numpy:,.0f}",
                  f"{t_numpy / t_store:.2f}x")
    table.add_row("sample 256 3-step transitions, batches/s", f"{1 / t_nstep:,.0f}", "", f"{t_numpy / t_nstep:.2f}x")
    table.add_row("sample 32 windows of 8, batches/s", f"{1 / t_windows:,.0f}", "", "")
    table.add_row("cold: load all into cache, s (MiB/s)", f"{t_cold_load:.2f} ({mb / t_cold_load:,.0f})", "", "")
    table.add_row(
        "cold: 256 random transitions from zarr, batches/s",
        f"{1 / t_zarr_batch:,.1f}",
        f"{1 / t_numpy:,.0f}",
        f"{t_numpy / t_zarr_batch:.4f}x",
    )
    table.add_row("size on disk, MiB (raw MiB)", f"{disk / 2**20:,.0f} ({mb:,.0f})", "", f"{disk / 2**20 / mb:.2f}")
    console.print(table)
    console.print(f"cached sampling is {t_store / t_numpy:.2f}x the time of in-RAM numpy (target <= 2x)")


if __name__ == "__main__":
    main()
