"""Data of bench/world_model.py, collected from the simulated arm once and reused.

DATA/main   demo: expert with small action noise (demonstrations, deployment domain)
            real: expert with large action noise (stand-in policy rollouts: off-nominal actions)
DATA/few    demo: the first few demonstrations only (the real-only co-training arm)
            sim:  randomised-domain expert episodes (camera, physics, lighting)
"""

from __future__ import annotations

import json
from pathlib import Path

from worldsample.config import load_config
from worldsample.paths import RunFiles
from worldsample.store import EpisodeStore


def _collect(
    run: Path, group: str, episodes: int, noise: float, seed: int, domain: str, steps: int, size: int, log
) -> None:
    from worldsample.demos import collect_demos

    cfg = load_config(
        None,
        [
            f"env.domain={domain}",
            f"env.max_episode_steps={steps}",
            f"env.image_size={size}",
            "env.include_state=false",
            f"demos.expert.action_noise_std={noise}",
            f"demos.seed={seed}",
        ],
    )
    have = (
        EpisodeStore(run).reader(group, cache=False).num_episodes
        if RunFiles.of(run).store.exists() and group in EpisodeStore(run).groups
        else 0
    )
    if have < episodes:
        s = collect_demos(
            run,
            cfg,
            episodes - have,
            group=group,
            on_episode=lambda i, ok, n: log(f"  {group}: episode {have + i + 1}/{episodes} ({n} steps)"),
        )
        log(f"{run.name}/{group}: {s.episodes} new episodes, {s.steps} steps in {s.seconds:.0f}s")


def _copy_few(src: Path, dst: Path, few: int) -> None:
    reader = EpisodeStore(src).reader("demo", cache=False)
    store = EpisodeStore(dst, create=True)
    store.ensure_group("demo", reader.schema)
    with store.writer("demo") as w:
        for rec in reader.episode_records()[w.num_episodes : few]:
            w.append_episode(reader.episode(rec.episode), domain=rec.domain)


def collect(data: Path, demos: int, rollouts: int, sim: int, few: int, steps: int, size: int, log=print) -> dict:
    data.mkdir(parents=True, exist_ok=True)
    spec = {"demos": demos, "rollouts": rollouts, "sim": sim, "few": few, "steps": steps, "size": size}
    marker = data / "spec.json"
    if marker.exists() and json.loads(marker.read_text()) != spec:
        raise SystemExit(f"{data} holds data of another spec {marker.read_text()}; use a new --data directory")
    marker.write_text(json.dumps(spec))
    _collect(data / "main", "demo", demos, 0.1, 0, "real", steps, size, log)
    _collect(data / "main", "real", rollouts, 0.6, 10_000, "real", steps, size, log)
    _collect(data / "main", "sim", sim, 0.3, 20_000, "sim", steps, size, log)
    return spec


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("bench/out/world_model/data"))
    ap.add_argument("--demos", type=int, default=16)
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--sim", type=int, default=12)
    ap.add_argument("--few", type=int, default=4)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    collect(a.data, a.demos, a.rollouts, a.sim, a.few, a.steps, 64)
