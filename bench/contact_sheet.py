"""What the policy sees: push-v3 through each Meta-World camera at the policy's image size.

Runs the scripted expert for seeded push-v3 episodes in the "real" domain and renders every
candidate camera with the render settings the env uses by default (RenderConfig()), upright
as the env makes them (level_world_cameras).

- The contact sheet (--out, a PNG): one row per camera, `--frames` frames spread over the first
  episode (first step to last), at `--size` pixels, upscaled `--scale` times with nearest
  neighbour so single pixels stay visible, the camera name left of each row.
- Visibility (printed, and --json): over `--seeds` episodes, every `--every` steps, a segmentation
  render counts the pixels of the gripper (hand, claws, pads), the puck and the goal marker in
  each camera; a part counts as seen in a frame from `--min-pixels` pixels on.

    .venv/bin/python bench/contact_sheet.py                       # docs/img/cameras_push.png
    .venv/bin/python bench/contact_sheet.py --cameras corner,gripperPOV --frames 8 --out /tmp/sheet.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from worldsample.sim import ScriptedExpert, SimArmConfig, make_env  # noqa: E402
from worldsample.sim.cameras import level_world_cameras  # noqa: E402
from worldsample.sim.config import CAMERA_NAMES, RenderConfig  # noqa: E402
from worldsample.sim.rendering import CameraRenderer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRIPPER_BODIES = ("hand", "rightclaw", "rightpad", "leftclaw", "leftpad")
PARTS = ("gripper", "puck", "goal")


def expert_episode(task: str, seed: int, max_steps: int) -> tuple[object, list[np.ndarray]]:
    """The env after a seeded expert episode and the full physics state after reset and each step."""
    env = make_env(SimArmConfig(task=task, cameras=[], max_episode_steps=max_steps, include_state=True))
    expert = ScriptedExpert(env)
    env.reset(seed=seed)
    arm = env.unwrapped._arm
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = []

    def snapshot() -> None:
        state = np.empty(mujoco.mj_stateSize(arm.model, spec))
        mujoco.mj_getState(arm.model, arm.data, state, spec)
        states.append(state)

    snapshot()
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(expert.act())
        snapshot()
        done = terminated or truncated
    return env, states


class SceneCounter:
    """Pixels of the gripper, the puck and the goal marker in a segmentation render of one camera."""

    def __init__(self, model: mujoco.MjModel, size: int) -> None:
        self._renderer = mujoco.Renderer(model, height=size, width=size)
        self._renderer.enable_segmentation_rendering()
        hand = {model.body(b).id for b in GRIPPER_BODIES}
        self._gripper = [g for g in range(model.ngeom) if model.geom_bodyid[g] in hand]
        self._puck = [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name == "obj"]
        self._goal = model.site("goal").id

    def count(self, data: mujoco.MjData, camera: str) -> dict[str, int]:
        self._renderer.update_scene(data, camera=camera)
        seg = self._renderer.render()
        ids, types = seg[..., 0], seg[..., 1]
        geom = types == mujoco.mjtObj.mjOBJ_GEOM
        return {
            "gripper": int((geom & np.isin(ids, self._gripper)).sum()),
            "puck": int((geom & np.isin(ids, self._puck)).sum()),
            "goal": int(((types == mujoco.mjtObj.mjOBJ_SITE) & (ids == self._goal)).sum()),
        }

    def close(self) -> None:
        self._renderer.close()


def restore(env, state: np.ndarray) -> mujoco.MjData:
    arm = env.unwrapped._arm
    mujoco.mj_setState(arm.model, arm.data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(arm.model, arm.data)
    return arm.data


def contact_sheet(env, states: list[np.ndarray], cameras: list[str], size: int, frames: int, scale: int) -> Image.Image:
    model = env.unwrapped._arm.model
    renderer = CameraRenderer(model, cameras, size, RenderConfig())
    picks = np.linspace(0, len(states) - 1, frames).round().astype(int)
    rows = {cam: [] for cam in cameras}
    for k in picks:
        for cam, img in renderer.render(restore(env, states[k])).items():
            rows[cam].append(img)
    renderer.close()
    label_w, gap, cell = 110, 4, size * scale
    sheet = Image.new("RGB", (label_w + frames * (cell + gap), 18 + len(cameras) * (cell + gap)), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for j, k in enumerate(picks):
        draw.text((label_w + j * (cell + gap) + 2, 3), f"step {k}", fill=(0, 0, 0))
    for i, cam in enumerate(cameras):
        y = 18 + i * (cell + gap)
        draw.text((4, y + cell // 2 - 6), cam, fill=(0, 0, 0))
        for j, img in enumerate(rows[cam]):
            sheet.paste(Image.fromarray(img).resize((cell, cell), Image.NEAREST), (label_w + j * (cell + gap), y))
    return sheet


def visibility(task: str, cameras: list[str], size: int, seeds: int, every: int, max_steps: int,
               min_pixels: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per camera and part: share of frames where it is seen, median and least pixel count; and
    "all": the share of frames where every part is seen at once."""
    counts: dict[str, dict[str, list[int]]] = {cam: {p: [] for p in PARTS} for cam in cameras}
    for seed in range(seeds):
        env, states = expert_episode(task, seed, max_steps)
        level_world_cameras(env.unwrapped._arm.model, cameras)
        counter = SceneCounter(env.unwrapped._arm.model, size)
        for k in list(range(0, len(states), every)) + [len(states) - 1]:
            data = restore(env, states[k])
            for cam in cameras:
                for part, n in counter.count(data, cam).items():
                    counts[cam][part].append(n)
        counter.close()
        env.close()
    out: dict[str, dict[str, dict[str, float]]] = {}
    for cam in cameras:
        out[cam] = {}
        for part in PARTS:
            n = np.asarray(counts[cam][part])
            out[cam][part] = {"seen": float((n >= min_pixels).mean()), "median_px": float(np.median(n)),
                              "min_px": int(n.min())}
        seen = np.stack([np.asarray(counts[cam][p]) >= min_pixels for p in PARTS])
        out[cam]["all"] = {"seen": float(seen.all(axis=0).mean()), "frames": int(seen.shape[1])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="push-v3")
    ap.add_argument("--cameras", default=",".join(CAMERA_NAMES), help="comma-separated Meta-World cameras")
    ap.add_argument("--size", type=int, default=64, help="image size the policy sees")
    ap.add_argument("--frames", type=int, default=6, help="frames per camera on the sheet")
    ap.add_argument("--scale", type=int, default=2, help="nearest-neighbour upscale of each frame")
    ap.add_argument("--seed", type=int, default=0, help="the episode on the sheet")
    ap.add_argument("--max-steps", type=int, default=150)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "cameras_push.png")
    ap.add_argument("--seeds", type=int, default=5, help="episodes for the visibility table (0: no table)")
    ap.add_argument("--every", type=int, default=10, help="steps between visibility frames")
    ap.add_argument("--min-pixels", type=int, default=2, help="pixels from which a part counts as seen")
    ap.add_argument("--json", type=Path, help="also write the visibility table here")
    args = ap.parse_args(argv)
    cameras = [c for c in args.cameras.split(",") if c]
    unknown = [c for c in cameras if c not in CAMERA_NAMES]
    if unknown or not cameras:
        ap.error(f"unknown camera(s) {unknown}; choose from {list(CAMERA_NAMES)}")

    env, states = expert_episode(args.task, args.seed, args.max_steps)
    level_world_cameras(env.unwrapped._arm.model, cameras)
    sheet = contact_sheet(env, states, cameras, args.size, args.frames, args.scale)
    env.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(args.out, optimize=True)
    print(f"wrote {args.out} ({sheet.width}x{sheet.height}, episode of {len(states) - 1} steps, seed {args.seed})")

    if args.seeds > 0:
        table = visibility(args.task, cameras, args.size, args.seeds, args.every, args.max_steps, args.min_pixels)
        print(f"\nvisibility at {args.size}x{args.size}, {args.seeds} expert episodes, every {args.every} steps "
              f"(seen = share of frames with >= {args.min_pixels} px; median px)")
        print(f"{'camera':<14}" + "".join(f"{p:>18}" for p in PARTS) + f"{'all three':>12}")
        for cam, parts in table.items():
            print(f"{cam:<14}" + "".join(f"{parts[p]['seen']:>10.0%} {parts[p]['median_px']:>6.0f}px" for p in PARTS)
                  + f"{parts['all']['seen']:>12.0%}")
        if args.json:
            args.json.write_text(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
