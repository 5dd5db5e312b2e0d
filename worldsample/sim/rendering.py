"""Offscreen RGB rendering of several named cameras with one reusable MuJoCo renderer."""

from __future__ import annotations

import os

import mujoco
import numpy as np


class CameraRenderer:
    """Renders `cameras` at size x size; one renderer serves all cameras since they share a size."""

    def __init__(self, model: mujoco.MjModel, cameras: list[str], size: int) -> None:
        vis = model.vis
        # The offscreen buffer must hold the image; Meta-World sizes it for 480 px.
        vis.global_.offwidth = max(vis.global_.offwidth, size)
        vis.global_.offheight = max(vis.global_.offheight, size)
        # Meta-World asks for a 4096^2 shadow map, which costs ~half the frame time under software
        # GL and is invisible at small image sizes; 8 texels per pixel keeps shadows crisp.
        vis.quality.shadowsize = int(np.clip(8 * size, 512, 4096))
        self._cameras = list(cameras)
        self._renderer = None
        try:
            self._renderer = mujoco.Renderer(model, height=size, width=size)
        except mujoco.FatalError as e:
            # Typically MuJoCo was imported before MUJOCO_GL was set, so it picked GLFW, which needs a display.
            raise RuntimeError(
                f"cannot create an offscreen OpenGL context (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}): "
                "set MUJOCO_GL=egl (or osmesa) before MuJoCo is first imported, e.g. import worldsample.sim "
                "first, or use cameras=[] for state-only observations"
            ) from e

    def render(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        images = {}
        for cam in self._cameras:
            self._renderer.update_scene(data, camera=cam)
            images[cam] = self._renderer.render()  # a fresh (H, W, 3) uint8 array, top row first
        return images

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
