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
from typing import TYPE_CHECKING

import numpy as np

from .poses import quat_to_rot

if TYPE_CHECKING:
    from .tf import TransformTree

__all__ = ['LocatedFrame', 'ObjectLook', 'Located', 'RgbdPairs', 'locate', 'mask_of']

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



@dataclass(frozen=True)
class LocatedFrame:
    """The objects found in one RGB-D pair: its stamp (ns), the frame the
    positions are in (the image's ``frame_id``, or the world frame where the
    camera's pose was given), and the objects by name; or, when the pair
    could not be used, ``problem`` in words and nothing found."""

    stamp_ns: int
    frame_id: str
    found: dict[str, Located]
    problem: str | None = None

    def transforms(self) -> list[tuple[str, str, tuple[float, float, float], tuple[float, float, float, float]]]:
        """Each object as a TF transform ``frame_id → name`` (identity orientation: none is estimated)."""
        return [(self.frame_id, name, f.position_m, (0.0, 0.0, 0.0, 1.0)) for name, f in sorted(self.found.items())]


class RgbdPairs:
    """One camera's colour images and depth images paired by stamp, and the
    objects of ``looks`` located in each pair (:func:`locate`, in the
    camera's frame or the world's): what ``camera_grounding`` does live, and the audit
    does with a recording's images.  ``K`` comes from ``CameraInfo``
    (:meth:`set_intrinsics`); up to ``kept`` images of either kind wait for
    their partner, the oldest dropped first (a camera whose depth never
    comes does not grow without bound).

    Example::

        >>> pairs = RgbdPairs([ObjectLook('cube', (0, 120, 60), (8, 255, 255), 0.0)], min_pixels=4)
        >>> pairs.set_intrinsics(np.array([[8.0, 0, 4], [0, 8.0, 4], [0, 0, 1]]))
        >>> rgb = np.full((8, 8, 3), 255, np.uint8); rgb[2:6, 2:6] = (200, 20, 20)
        >>> pairs.add('image', 5, 'cam', rgb) is None          # waits for its depth
        True
        >>> frame = pairs.add('depth', 5, 'cam', np.full((8, 8), 1.0, np.float32))
        >>> frame.transforms()
        [('cam', 'cube', (0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0))]
    """

    def __init__(self, looks: Sequence[ObjectLook], kept: int = 8, min_pixels: int = 12) -> None:
        self.looks = list(looks)
        self.kept = kept
        self.min_pixels = min_pixels
        self.K: np.ndarray | None = None
        self._waiting: dict[str, dict[int, tuple[str, np.ndarray]]] = {'image': {}, 'depth': {}}

    def set_intrinsics(self, K: np.ndarray) -> None:
        """The pinhole ``K`` (3×3) of the camera the images come from."""
        self.K = np.asarray(K, float).reshape(3, 3)

    def add(self, kind: str, stamp_ns: int, frame_id: str, array: np.ndarray,
            world: tuple[TransformTree, str] | None = None) -> LocatedFrame | None:
        """An image (``kind`` ``image``: rgb ``uint8[h, w, 3]``) or depth image
        (``depth``: metres ``[h, w]``) stamped ``stamp_ns``: the pair's
        objects once its partner of the same stamp has come, else None.
        ``world``: a TF tree and its world frame; given, the objects are
        placed in the world through the camera's pose at the capture, upright
        (the identity orientation means that there, not the camera's tilt),
        and a pair taken before that pose is known is a problem."""
        other_kind = 'depth' if kind == 'image' else 'image'
        other = self._waiting[other_kind].pop(stamp_ns, None)
        if other is None:
            waiting = self._waiting[kind]
            waiting[stamp_ns] = (frame_id, array)
            while len(waiting) > self.kept:
                del waiting[min(waiting)]
            return None
        (frame, rgb), (_, depth_m) = ((frame_id, array), other) if kind == 'image' else (other, (frame_id, array))
        if self.K is None:
            return LocatedFrame(stamp_ns, frame, {}, 'no camera_info yet; RGB-D pairs skipped')
        if rgb.ndim != 3 or depth_m.shape != rgb.shape[:2]:
            return LocatedFrame(stamp_ns, frame, {}, f'image {rgb.shape[1]}x{rgb.shape[0]} and depth '
                                f'{depth_m.shape[-1]}x{depth_m.shape[0]} are not one aligned RGB-D pair')
        parent, pose = frame, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        if world is not None:
            tree, parent = world
            in_world = tree.pose_of(parent, frame, stamp_ns * 1e-9)
            if in_world is None:
                return LocatedFrame(stamp_ns, frame, {}, f'no pose of {frame} in {parent} at the capture')
            pose = in_world
        return LocatedFrame(stamp_ns, parent, locate(rgb, depth_m, self.K, pose, self.looks, self.min_pixels))
