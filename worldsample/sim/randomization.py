"""Domain randomisation of the MuJoCo model: camera viewpoints, friction, object mass, lighting.

The randomiser snapshots the nominal model once and every episode writes nominal * perturbation
back, so perturbations never compound across episodes and the "real" domain is exactly nominal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from worldsample.sim.cameras import CameraOffset, orbit, pivot_distance
from worldsample.sim.config import RandomizationConfig


@dataclass(frozen=True)
class Perturbation:
    """One episode's sampled perturbation; all scales are 1 and offsets 0 for the nominal scene."""

    cameras: dict[str, CameraOffset] = field(default_factory=dict)
    friction_scale: float = 1.0
    mass_scale: float = 1.0
    light_scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cameras": {name: off.to_dict() for name, off in self.cameras.items()},
            "friction_scale": float(self.friction_scale),
            "mass_scale": float(self.mass_scale),
            "light_scale": float(self.light_scale),
        }


class DomainRandomizer:
    def __init__(self, model: mujoco.MjModel, cameras: list[str], cfg: RandomizationConfig) -> None:
        self._model = model
        self._cfg = cfg
        self._cameras = list(cameras)
        self._cam_pose = {c: (model.camera(c).pos.copy(), model.camera(c).quat.copy()) for c in cameras}
        self._cam_pivot = {c: pivot_distance(model, c) for c in cameras}
        self._friction = model.geom_friction.copy()
        # Free-jointed bodies are the objects the arm manipulates; the arm itself is mocap-driven.
        free = model.jnt_bodyid[model.jnt_type == mujoco.mjtJoint.mjJNT_FREE]
        self._object_bodies = np.unique(free)
        self._mass = model.body_mass[self._object_bodies].copy()
        self._inertia = model.body_inertia[self._object_bodies].copy()
        self._light_diffuse = model.light_diffuse.copy()
        self._headlight_diffuse = model.vis.headlight.diffuse.copy()

    def nominal(self) -> Perturbation:
        return Perturbation(cameras={c: CameraOffset() for c in self._cameras})

    def sample(self, rng: np.random.Generator) -> Perturbation:
        cfg = self._cfg
        jitter = cfg.camera_jitter_deg
        cameras = {
            c: CameraOffset(
                azimuth_deg=float(rng.uniform(-jitter, jitter)),
                elevation_deg=float(rng.uniform(-jitter, jitter)),
                distance_scale=float(rng.uniform(*cfg.camera_distance_scale)),
            )
            for c in self._cameras
        }
        return Perturbation(
            cameras=cameras,
            friction_scale=float(rng.uniform(*cfg.friction_scale)),
            mass_scale=float(rng.uniform(*cfg.mass_scale)),
            light_scale=float(rng.uniform(*cfg.light_scale)),
        )

    def apply(self, p: Perturbation) -> None:
        m = self._model
        for name, offset in p.cameras.items():
            pos, quat = orbit(*self._cam_pose[name], self._cam_pivot[name], offset)
            m.camera(name).pos[:] = pos
            m.camera(name).quat[:] = quat
        m.geom_friction[:] = self._friction * p.friction_scale
        # Scaling inertia with mass keeps the object's density uniform, i.e. physically plausible.
        m.body_mass[self._object_bodies] = self._mass * p.mass_scale
        m.body_inertia[self._object_bodies] = self._inertia * p.mass_scale
        m.light_diffuse[:] = self._light_diffuse * p.light_scale
        m.vis.headlight.diffuse[:] = self._headlight_diffuse * p.light_scale
