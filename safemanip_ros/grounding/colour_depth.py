"""Object positions from one RGB-D frame: colour segmentation plus depth back-projection.

For each object of a known colour (:class:`ObjectLook`): the pixels whose
HSV colour lies in its range, the largest 8-connected region of them (a
stray pixel of the same colour elsewhere is not the object), shrunk by a
pixel where it is large enough (depth at an object's silhouette mixes it
with what is behind), back-projected through the pinhole ``K`` with their
depth, and the per-axis median of those points: the visible surface's
centre, robust to pixels of the background or the gripper that pass the
colour test.  The object's centre lies behind that surface, along the
viewing ray, by ``centre_behind_m`` (half the object's depth as seen).

What it does not do, and a caller must know: no orientation (the
quaternion published is the identity: configure the pose source's
``orientation_noise_rad`` accordingly), no tracking across frames (the
monitor's tracker does that), and an object too hidden (fewer than
``min_pixels`` pixels) is not reported at all, never guessed.

Units: metres, pixels; ``K`` the 3×3 pinhole matrix with pixel centres at
``u + 0.5`` (OpenGL and ``sensor_msgs/CameraInfo``'s convention for a
rendered image); depth along the optical axis (``32FC1``, metres, NaN or
0 where unknown); the camera pose is its optical frame (x right, y down,
z forward) in the world.

Example::

    >>> import numpy as np
    >>> rgb = np.full((8, 8, 3), 255, np.uint8); rgb[2:6, 2:6] = (200, 20, 20)
    >>> depth = np.full((8, 8), 1.0, np.float32)
    >>> K = np.array([[8.0, 0, 4], [0, 8.0, 4], [0, 0, 1]])
    >>> red = ObjectLook('cube', (0, 120, 60), (8, 255, 255), 0.0)
    >>> found = locate(rgb, depth, K, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), [red], min_pixels=4)
    >>> [round(v, 3) for v in found['cube'].position_m], found['cube'].pixels
    ([0.0, 0.0, 1.0], 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .poses import quat_to_rot

__all__ = ['ObjectLook', 'Located', 'locate', 'mask_of']

Pose = tuple[tuple[float, float, float], tuple[float, float, float, float]]


@dataclass(frozen=True)
class ObjectLook:
    """An object as the camera sees it: ``name`` (the TF frame published),
    its colour as an OpenCV HSV range (H 0–179, S and V 0–255; a low hue
    above the high one wraps through 0, as red does), and ``centre_behind_m``:
    how far its centre lies behind its visible surface."""

    name: str
    hsv_low: tuple[int, int, int]
    hsv_high: tuple[int, int, int]
    centre_behind_m: float


@dataclass(frozen=True)
class Located:
    """An object found: its centre in the world (m) and the pixels it was measured from."""

    position_m: tuple[float, float, float]
    pixels: int


def mask_of(hsv: np.ndarray, look: ObjectLook) -> np.ndarray:
    """``bool[h, w]``: the pixels of ``hsv`` (OpenCV HSV, uint8) in ``look``'s colour range."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    (h0, s0, v0), (h1, s1, v1) = look.hsv_low, look.hsv_high
    hue = (h >= h0) & (h <= h1) if h0 <= h1 else (h >= h0) | (h <= h1)
    out: np.ndarray = hue & (s >= s0) & (s <= s1) & (v >= v0) & (v <= v1)
    return out


def locate(rgb: np.ndarray, depth_m: np.ndarray, K: np.ndarray, camera_pose: Pose, looks: Sequence[ObjectLook],
           min_pixels: int = 12) -> dict[str, Located]:
    """The objects of ``looks`` found in one frame (module docstring), by name."""
    import cv2
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV)
    valid = np.isfinite(depth_m) & (depth_m > 0)
    fx, fy, cx, cy = float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])
    R, t = quat_to_rot(np.asarray(camera_pose[1], float)), np.asarray(camera_pose[0], float)
    out: dict[str, Located] = {}
    for look in looks:
        mask = (mask_of(hsv, look) & valid).astype(np.uint8)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        if n <= 1:
            continue
        biggest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
        region = (labels == biggest).astype(np.uint8)
        if int(stats[biggest, cv2.CC_STAT_AREA]) < min_pixels:
            continue
        inner = cv2.erode(region, np.ones((3, 3), np.uint8))
        if int(inner.sum()) >= min_pixels:       # the silhouette's depth is part background: left out
            region = inner
        v, u = np.nonzero(region)
        z = depth_m[v, u].astype(float)
        points = np.stack([(u + 0.5 - cx) * z / fx, (v + 0.5 - cy) * z / fy, z], axis=1)
        surface = np.median(points, axis=0)
        centre = surface + surface / np.linalg.norm(surface) * look.centre_behind_m
        x, y, zw = (R @ centre + t).tolist()
        out[look.name] = Located((x, y, zw), int(len(u)))
    return out

