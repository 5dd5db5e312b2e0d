"""A small but complete run directory for dashboard tests and the benchmark: two groups with
camera frames that visibly move, metrics, events, a status file, a policy and a report."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from worldsample.runlog import EventLog, MetricsWriter, RobotState, StatusFile
from worldsample.store import EpisodeStore, GroupSchema, KeySpec

CAMERAS = ("front", "wrist")


def schema(size: int, chunk_len: int = 32) -> GroupSchema:
    obs = {f"image_{c}": KeySpec(dtype="uint8", shape=(size, size, 3), kind="image", camera=c) for c in CAMERAS}
    obs["proprio"] = KeySpec(dtype="float32", shape=(4,), finite=True)
    return GroupSchema.build(obs, action_dim=4, chunk_len=chunk_len)


def frames(length: int, size: int, seed: int, hue: int) -> np.ndarray:
    """A block that slides across a gradient: enough structure to see the player move."""
    yy, xx = np.mgrid[0:size, 0:size]
    base = np.stack([xx * 120 // size + 20, yy * 90 // size + 30, np.full_like(xx, 60 + hue)], -1).astype(np.uint8)
    out = np.repeat(base[None], length, axis=0)
    b = max(3, size // 6)
    for t in range(length):
        cx = int((size - b) * (0.5 + 0.45 * math.sin(0.15 * t + seed)))
        cy = int((size - b) * (0.5 + 0.45 * math.cos(0.11 * t + 2 * seed)))
        out[t, cy : cy + b, cx : cx + b] = (240, 200 - hue, 60 + hue)
    return out


def episode(seed: int, length: int, size: int, success: bool, intervene: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    action = np.stack([np.sin(0.1 * t + k + seed) * 0.8 for k in range(4)], 1).astype(np.float32)
    action += rng.normal(0, 0.05, action.shape).astype(np.float32)
    reward = (0.5 + 0.5 * np.tanh((t - length * 0.7) / 5)).astype(np.float32)
    done = np.zeros(length, bool)
    succ = np.zeros(length, bool)
    if success:
        succ[-3:] = True
        done[-1] = True
    inter = np.zeros(length, bool)
    if intervene:
        inter[length // 3 : length // 3 + 6] = True
    return {
        "image_front": frames(length, size, seed, 0),
        "image_wrist": frames(length, size, seed + 7, 80),
        "proprio": rng.normal(size=(length, 4)).astype(np.float32),
        "action": np.clip(action, -1, 1),
        "reward": reward,
        "done": done,
        "success": succ,
        "intervention": inter,
    }


def make_run(run: Path, episodes: int = 6, length: int = 40, size: int = 48, metric_rows: int = 300) -> Path:
    run = Path(run)
    store = EpisodeStore(run, create=True)
    for g in ("demo", "real"):
        store.ensure_group(g, schema(size))
    with store.writer("demo") as w:
        for i in range(episodes):
            w.append_episode(episode(i, length, size, success=i % 3 != 2), domain="real", extra={"source": "test"})
    with store.writer("real") as w:
        for i in range(episodes):
            w.append_episode(
                episode(100 + i, length + i, size, success=i % 2 == 0, intervene=i == 1), policy_version=1 + i // 3
            )
    now = time.time()
    with MetricsWriter(run) as m:
        for k in range(metric_rows):
            s = k * 50
            m.log(
                s,
                {
                    "loss/critic": 2.0 * math.exp(-k / 80) + 0.1 * math.sin(k / 3),
                    "loss/actor": -0.5 - k / metric_rows,
                    "eval/success": min(1.0, k / metric_rows + 0.05 * math.sin(k)),
                    "ppl/synthetic_share": 0.3 / (1 + 4 * math.exp(-k / 60)),
                    "wm/psnr": 18 + 10 * (1 - math.exp(-k / 100)),
                },
                time=now - (metric_rows - k) * 2.0,
            )
    ev = EventLog(run, source="trainer")
    ev.emit("run_started", "trainer started on the simulated arm")
    ev.emit("policy_published", "policy v2 published", version=2)
    ev.emit("wm_checkpoint", "world model v1 checkpoint saved", level="info", version=1)
    ev.close()
    st = StatusFile(run)
    st.heartbeat(
        "trainer", detail="SAC + PPL, UTD 2", learner_step=(metric_rows - 1) * 50, policy_version=2, wm_version=1
    )
    st.update(
        lambda s: s.model_copy(
            update={"phase": "training", "robot": RobotState(connected=True, control_hz=10.0, transport="dds")}
        )
    )
    pol = run / "policies" / "v0002"
    pol.mkdir(parents=True, exist_ok=True)
    (pol / "actor.safetensors").write_bytes(b"\0" * 1024)
    (pol / "meta.json").write_text(json.dumps({"version": 2, "step": 12000}))
    (run / "reports").mkdir(exist_ok=True)
    (run / "reports" / "eval_v2.json").write_text(
        json.dumps(
            {
                "kind": "policy_eval",
                "source": "world_model",
                "policies": [
                    {"policy": "v1", "episodes": 20, "success_rate": 0.45, "mean_return": 11.2},
                    {"policy": "v2", "episodes": 20, "success_rate": 0.7, "mean_return": 15.9},
                ],
            }
        )
    )
    return run
