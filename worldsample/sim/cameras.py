"""Camera pose helpers: make Meta-World's cameras upright, and orbit them around what they look at.

MuJoCo camera frames look along -z with +y up in the image. Poses are edited in the model
(cam_pos / cam_quat, relative to the camera's parent body), so rendering needs no special case.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import mujoco
import numpy as np

# Where a camera mounted on the arm orbits: roughly the distance from the gripper to the table.
_BODY_CAMERA_PIVOT_M = 0.3
_WORLD_UP = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True)
class CameraOffset:
    """A viewpoint perturbation; the zero offset is the nominal view."""

    azimuth_deg: float = 0.0
    elevation_deg: float = 0.0
    distance_scale: float = 1.0

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def quat_to_mat(quat: np.ndarray) -> np.ndarray:
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=np.float64))
    return mat.reshape(3, 3)


def mat_to_quat(mat: np.ndarray) -> np.ndarray:
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(mat, dtype=np.float64).ravel())
    return quat


def axis_rotation(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    """Rotation matrix about a unit axis (Rodrigues)."""
    x, y, z = axis / np.linalg.norm(axis)
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle_rad) * k + (1.0 - np.cos(angle_rad)) * (k @ k)


def level_world_cameras(model: mujoco.MjModel, names: list[str]) -> None:
    """Roll world-mounted cameras so the world's up is up in the image.

    Meta-World's "corner*" cameras are defined upside down or tilted; a learner does not care,
    but people reading the stored episodes do. The optical axis is kept, only the roll changes.
    Cameras looking straight down (topview) have no horizon and are left alone.
    """
    for name in names:
        cam = model.camera(name)
        if model.cam_bodyid[cam.id] != 0:
            continue
        forward = -quat_to_mat(cam.quat)[:, 2]
        right = np.cross(forward, _WORLD_UP)
        if np.linalg.norm(right) < 1e-3:
            continue
        right /= np.linalg.norm(right)
        up = np.cross(right, forward)
        cam.quat[:] = mat_to_quat(np.column_stack([right, up, -forward]))


def pivot_distance(model: mujoco.MjModel, name: str) -> float:
    """Distance along the optical axis to the point the camera orbits around.

    World cameras orbit the point where their axis meets the table top (z = 0), which keeps the
    workspace in view; cameras on the arm orbit a point a gripper-to-table distance ahead.
    """
    cam = model.camera(name)
    forward = -quat_to_mat(cam.quat)[:, 2]
    if model.cam_bodyid[cam.id] == 0 and forward[2] < -0.1:
        return float(cam.pos[2] / -forward[2])
    return _BODY_CAMERA_PIVOT_M


def orbit(
    pos: np.ndarray, quat: np.ndarray, pivot_dist: float, offset: CameraOffset
) -> tuple[np.ndarray, np.ndarray]:
    """Pose of a camera moved around its pivot by `offset`; it keeps looking at the pivot.

    Azimuth turns about the vertical through the pivot, elevation about the camera's right axis,
    so a level camera stays level.
    """
    mat = quat_to_mat(quat)
    pivot = pos + pivot_dist * -mat[:, 2]
    rot = axis_rotation(_WORLD_UP, np.deg2rad(offset.azimuth_deg)) @ axis_rotation(
        mat[:, 0], np.deg2rad(offset.elevation_deg)
    )
    new_pos = pivot + offset.distance_scale * (rot @ (pos - pivot))
    return new_pos, mat_to_quat(rot @ mat)
