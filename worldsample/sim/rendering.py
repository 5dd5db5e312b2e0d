"""Offscreen RGB rendering of several named cameras with one reusable MuJoCo renderer."""

from __future__ import annotations

import os

import mujoco
import numpy as np

from worldsample.sim.config import RenderConfig


class CameraRenderer:
    """Renders `cameras` at size x size with the quality of `settings` (see RenderConfig); one
    renderer serves all cameras since they share a size."""

    def __init__(
        self, model: mujoco.MjModel, cameras: list[str], size: int, settings: RenderConfig | None = None
    ) -> None:
        self.settings = settings = settings or RenderConfig()
        vis = model.vis
        # The offscreen buffer must hold the image; Meta-World sizes it for 480 px.
        vis.global_.offwidth = max(vis.global_.offwidth, size)
        vis.global_.offheight = max(vis.global_.offheight, size)
        # Both are read when the GL context is made: the multisampled buffer and the shadow map
        # (size 0 allocates none; Meta-World's 4096^2 depth map alone is 64 MiB).
        vis.quality.offsamples = settings.multisample
        vis.quality.shadowsize = settings.shadow_size if settings.shadows else 0
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
        flags = self._renderer.scene.flags  # update_scene keeps these; they apply to every camera
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(settings.shadows)
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(settings.reflections)

    @property
    def scene(self) -> mujoco.MjvScene:
        """The scene the cameras are rendered from (its flags carry the render settings)."""
        return self._renderer.scene

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
