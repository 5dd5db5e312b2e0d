"""Render time per camera frame: Meta-World's render settings ("before") against the fast defaults.

Before: RenderConfig.metaworld() (4096 shadow map, reflections, 4x multisampling), what
Meta-World's scene asks for. After: RenderConfig() (shadows, reflections and multisampling off),
what the env and `worldsample sim-robot` use by default. Both are measured in the same run,
interleaved in rounds so that load from other processes hits both alike; the figure is the median
over rounds of the mean time of `--frames` frames (update_scene + render + read back), per camera
and image size: wall time, and the CPU time of this process (all its threads: llvmpipe renders
on several), which depends less on what else runs on the machine. The last lines are one env
step of the simulated arm (physics + the render of each camera) with the defaults, against the
sim robot's control period.

    .venv/bin/python bench/render.py                          # 64x64, every camera
    .venv/bin/python bench/render.py --sizes 64,128 --cameras corner4,gripperPOV
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from worldsample.sim import ScriptedExpert, SimArmConfig, make_env  # noqa: E402
from worldsample.sim.config import CAMERA_NAMES, RenderConfig  # noqa: E402
from worldsample.sim.rendering import CameraRenderer  # noqa: E402

SETTINGS = {"before": RenderConfig.metaworld(), "after": RenderConfig()}


def gl_renderer() -> str:
    try:
        from OpenGL import GL

        return GL.glGetString(GL.GL_RENDERER).decode()
    except Exception as e:  # the name is informative only
        return f"unknown ({type(e).__name__})"


def mid_episode_env(task: str, steps: int = 20):
    """A state-only env after `steps` expert steps: the arm above the table, the puck in reach."""
    env = make_env(SimArmConfig(task=task, cameras=[]))
    env.reset(seed=0)
    expert = ScriptedExpert(env)
    for _ in range(steps):
        env.step(expert.act())
    return env


def time_frames(renderer: CameraRenderer, data, frames: int) -> tuple[float, float]:
    """Wall and CPU ms per frame."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(frames):
        renderer.render(data)
    return 1000 * (time.perf_counter() - t0) / frames, 1000 * (time.process_time() - c0) / frames


def frame_times(task: str, cameras: list[str], size: int, frames: int, rounds: int) -> dict[str, dict[str, tuple]]:
    """{camera: {"before": (wall ms, cpu ms), "after": (wall ms, cpu ms)}} at size x size."""
    envs = {name: mid_episode_env(task) for name in SETTINGS}  # one model each: settings live in the model
    out: dict[str, dict[str, float]] = {}
    for cam in cameras:
        renderers = {name: CameraRenderer(envs[name].unwrapped._arm.model, [cam], size, cfg)
                     for name, cfg in SETTINGS.items()}
        for name, r in renderers.items():
            r.render(envs[name].unwrapped._arm.data)  # the first frame builds the GL state
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in SETTINGS}
        for _ in range(rounds):
            for name, r in renderers.items():
                samples[name].append(time_frames(r, envs[name].unwrapped._arm.data, frames))
        out[cam] = {name: tuple(np.median(np.asarray(v), axis=0).tolist()) for name, v in samples.items()}
        for r in renderers.values():
            r.close()
    for env in envs.values():
        env.close()
    return out


def step_time(task: str, cameras: list[str], size: int, steps: int) -> tuple[float, float]:
    """Mean wall and CPU ms of one env step (physics + render of `cameras`) with the default render settings."""
    env = make_env(SimArmConfig(task=task, cameras=cameras, image_size=size, max_episode_steps=10 * steps))
    env.reset(seed=0)
    expert = ScriptedExpert(env)
    env.step(expert.act())
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        env.step(expert.act())
    wall, cpu = 1000 * (time.perf_counter() - t0) / steps, 1000 * (time.process_time() - c0) / steps
    env.close()
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="push-v3")
    ap.add_argument("--cameras", default=",".join(CAMERA_NAMES), help="comma-separated Meta-World cameras")
    ap.add_argument("--sizes", default="64", help="comma-separated image sizes, e.g. 64,128")
    ap.add_argument("--frames", type=int, default=3, help="frames per round and setting")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (the median is reported)")
    ap.add_argument("--step-cameras", default="corner4,gripperPOV",
                    help="cameras of the env-step measurement ('' to skip it)")
    ap.add_argument("--control-hz", type=float, default=10.0, help="the sim robot's control rate")
    args = ap.parse_args(argv)
    cameras = [c for c in args.cameras.split(",") if c]
    step_cams = [c for c in args.step_cameras.split(",") if c]
    unknown = [c for c in cameras + step_cams if c not in CAMERA_NAMES]
    if unknown or not cameras:
        ap.error(f"unknown camera(s) {unknown}; choose from {list(CAMERA_NAMES)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]

    t_start = time.perf_counter()
    results = {size: frame_times(args.task, cameras, size, args.frames, args.rounds) for size in sizes}
    probe = make_env(SimArmConfig(task=args.task, cameras=["corner"], image_size=16))
    gl = gl_renderer()
    probe.close()
    print(f"{args.task}, MUJOCO_GL={os.environ.get('MUJOCO_GL')}, GL renderer: {gl}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("before = RenderConfig.metaworld() (shadows 4096, reflections, 4x MSAA); after = RenderConfig() (all off)")
    print(f"ms per frame, median of {args.rounds} rounds of {args.frames} frames\n")
    print(f"{'':<20}{'---- wall ms ----':>29}{'---- CPU ms ----':>29}")
    print(f"{'camera':<14}{'size':>6}" + f"{'before':>10}{'after':>9}{'speed-up':>10}" * 2)

    def row(cam: str, size: int, before: tuple, after: tuple) -> str:
        return f"{cam:<14}{size:>6}" + "".join(f"{b:>10.1f}{a:>9.1f}{b / a:>9.1f}x" for b, a in zip(before, after))

    for size, per_cam in results.items():
        for cam, t in per_cam.items():
            print(row(cam, size, t["before"], t["after"]))
        mean = {k: np.mean([t[k] for t in per_cam.values()], axis=0) for k in SETTINGS}
        print(row("mean", size, mean["before"], mean["after"]))
    if step_cams:
        budget = 1000 / args.control_hz
        print()
        for size in sizes:
            wall, cpu = step_time(args.task, step_cams, size, steps=20)
            print(f"env step with {'+'.join(step_cams)} at {size}x{size} (defaults): {wall:.1f} ms wall, "
                  f"{cpu:.1f} ms CPU; the period at {args.control_hz:g} Hz is {budget:.0f} ms")
    print(f"\n({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
