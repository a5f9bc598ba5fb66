"""Entity shapes and the support test built on them.

An entity's TF frame is the body's origin as TF publishes it; its *shape*
(box half-extents, cylinder radius and half-height, sphere radius, or a
mesh's bounding box given as a box) says where its surfaces are relative to
that origin.  Support compares the **bottom** of the supported object with
the **top** of the support, both derived from the shapes, so a 4.3 cm cube
resting on a table counts as supported whatever its frame's height.

All lengths in metres; rotations as 3x3 matrices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SHAPE_KINDS = ('box', 'cylinder', 'sphere', 'point')


@dataclass(frozen=True)
class Shape:
    """A convex shape centred on its frame's origin (axis along the frame's z
    for a cylinder).  ``point`` is the legacy "no shape given": the origin
    itself is the bottom and the top."""

    kind: str = 'point'
    dims_m: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        want = {'box': 3, 'cylinder': 2, 'sphere': 1, 'point': 0}.get(self.kind)
        if want is None:
            raise ValueError(f'shape kind {self.kind!r}: expected one of {", ".join(SHAPE_KINDS)}')
        if len(self.dims_m) != want or any(not (math.isfinite(d) and d >= 0) for d in self.dims_m):
            raise ValueError(f'shape {self.kind}: expected {want} finite non-negative dimensions in metres, '
                             f'got {list(self.dims_m)}')

    def extent_along(self, axis: np.ndarray, rotation: np.ndarray) -> float:
        """Half the shape's width along the unit vector ``axis`` (expressed
        in the frame the ``rotation`` maps the shape's frame into): the
        distance from the centre to the supporting plane on that side
        (:func:`extents_along` for one frame)."""
        return float(extents_along(self, np.asarray(axis, float)[None], np.asarray(rotation, float)[None])[0])

    def half_extent_z(self) -> float:
        """Half-height along the shape's own z (top surface offset of an upright support)."""
        if self.kind == 'box':
            return self.dims_m[2]
        if self.kind == 'cylinder':
            return self.dims_m[1]
        if self.kind == 'sphere':
            return self.dims_m[0]
        return 0.0

    def footprint_m(self) -> tuple[float, float]:
        """Half-extents (x, y) of the shape's top face in its own frame."""
        if self.kind == 'box':
            return self.dims_m[0], self.dims_m[1]
        if self.kind in ('cylinder', 'sphere'):
            return self.dims_m[0], self.dims_m[0]
        return 0.0, 0.0


def _cube_turns() -> np.ndarray:
    """The 24 rotations that map an axis-aligned cube onto itself (signed permutation matrices, det +1)."""
    import itertools
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            S = np.zeros((3, 3))
            S[range(3), perm] = signs
            if np.linalg.det(S) > 0:
                out.append(S)
    return np.array(out)


_CUBE_TURNS = _cube_turns()
_HALF_TURN_X = np.diag([1.0, -1.0, -1.0])


def turns_onto_itself(shape: Shape) -> np.ndarray:
    """``[k, 3, 3]``: the rotations (in the shape's own frame) that map a box
    onto itself, the identity first: its three half turns always, quarter
    turns about an axis whose two cross extents are equal, all 24 for a
    cube.  A cylinder's are :data:`_HALF_TURN_X` and every spin about its
    axis (:func:`nearest_equivalent` handles the spin); a point's only the
    identity (no shape: nothing is assumed)."""
    if shape.kind == 'box':
        dims = np.asarray(shape.dims_m, float)
        # S maps the box onto itself when it only permutes equal extents.
        keep = [S for S in _CUBE_TURNS if np.allclose(np.abs(S) @ dims, dims, rtol=1e-6, atol=1e-9)]
        return np.array(keep)
    if shape.kind == 'cylinder':
        return np.array([np.eye(3), _HALF_TURN_X])
    return np.eye(3)[None]


def nearest_equivalent(R: np.ndarray, R_ref: np.ndarray, shape: Shape, turns: np.ndarray | None = None) -> np.ndarray:
    """``S`` such that ``R @ S`` is, of the orientations that look the same
    as ``R`` (``R`` turned by a rotation of the shape onto itself), the one
    nearest ``R_ref``: what a detector that cannot tell them apart may have
    meant.  A sphere looks the same in every orientation (``R @ S`` is
    ``R_ref``); a cylinder whatever its spin about its axis.  ``turns``:
    :func:`turns_onto_itself` of ``shape``, where the caller keeps them."""
    R, R_ref = np.asarray(R, float), np.asarray(R_ref, float)
    if shape.kind == 'sphere':
        out: np.ndarray = R.T @ R_ref
        return out
    if turns is None:
        turns = turns_onto_itself(shape)
    A = R_ref.T @ R
    if shape.kind == 'cylinder':
        best, best_trace = np.eye(3), -math.inf
        for F in turns:
            B = A @ F        # trace(B Rz(θ)) = (B00 + B11) cos θ + (B01 - B10) sin θ + B22, largest at:
            theta = math.atan2(B[0, 1] - B[1, 0], B[0, 0] + B[1, 1])
            c, s = math.cos(theta), math.sin(theta)
            S = F @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
            tr = float(np.trace(A @ S))
            if tr > best_trace + 1e-12:
                best, best_trace = S, tr
        return best
    # The largest trace of R_ref^T R S is the smallest angle between R S and R_ref.
    traces = np.einsum('ij,kji->k', A, turns)
    nearest: np.ndarray = turns[int(np.argmax(traces - 1e-12 * np.arange(len(turns))))]
    return nearest


@dataclass(frozen=True)
class SupportSurface:
    """The top face of a support: a rectangle of half-extents ``half_x_m``,
    ``half_y_m`` at height ``top_z_m`` in the support's frame (a cylinder's
    top is tested as its bounding square)."""

    frame: str
    half_x_m: float
    half_y_m: float
    top_z_m: float = 0.0




def support_gap_m(object_in_support: np.ndarray, shape: Shape, surface: SupportSurface) -> float | None:
    """Height of the object's lowest point above the support's top face, or
    None when the object's centre is not over the face (4x4 pose of the
    object in the support's frame)."""
    T = np.asarray(object_in_support, dtype=float)
    gap = float(support_gaps_m(T[None, :3, :3], T[None, :3, 3], shape, surface)[0])
    return None if math.isnan(gap) else gap


def support_gaps_m(R: np.ndarray, t: np.ndarray, shape: Shape, surface: SupportSurface) -> np.ndarray:
    """:func:`support_gap_m` of object poses ``(R[n, 3, 3], t[n, 3])`` in the
    support's frame: ``[n]`` m, NaN where the centre is not over the face."""
    over = (np.abs(t[:, 0]) <= surface.half_x_m) & (np.abs(t[:, 1]) <= surface.half_y_m)
    gap = t[:, 2] - depth_below_centre_m(R, shape) - surface.top_z_m
    out: np.ndarray = np.where(over, gap, np.nan)
    return out


def rests_on(object_in_support: np.ndarray, shape: Shape, surface: SupportSurface, tolerance_m: float) -> bool:
    """The object's bottom lies within ``tolerance_m`` of the support's top
    face (either side: simulated contacts interpenetrate by millimetres) and
    its centre is over the face (4x4 pose of the object in the support's frame)."""
    T = np.asarray(object_in_support, dtype=float)
    return bool(rests_on_rows(T[None, :3, :3], T[None, :3, 3], [shape], 1, surface, tolerance_m)[0])


def extents_along(shape: Shape, axis: np.ndarray, R: np.ndarray) -> np.ndarray:
    """:meth:`Shape.extent_along` for many frames: half the shape's width
    along the unit vectors ``axis[n, 3]``, expressed in the frames the
    rotations ``R[n, 3, 3]`` map the shape's frame into."""
    n = len(R)
    if shape.kind == 'point':
        return np.zeros(n)
    if shape.kind == 'sphere':
        return np.full(n, float(shape.dims_m[0]))
    local = R[:, 0, :] * axis[:, 0, None] + R[:, 1, :] * axis[:, 1, None] + R[:, 2, :] * axis[:, 2, None]
    if shape.kind == 'box':
        dx, dy, dz = shape.dims_m
        box: np.ndarray = np.abs(local[:, 0]) * dx + np.abs(local[:, 1]) * dy + np.abs(local[:, 2]) * dz
        return box
    radius, half_height = shape.dims_m
    along = np.abs(local[:, 2])
    cylinder: np.ndarray = half_height * along + radius * np.sqrt(np.maximum(0.0, 1.0 - along * along))
    return cylinder


_UP = np.array([0.0, 0.0, 1.0])


def depth_below_centre_m(R: np.ndarray, shape: Shape) -> np.ndarray:
    """:func:`extents_along` the support's up axis for object rotations
    ``R[n, 3, 3]`` in the support's frame: how far the shape reaches below
    its centre."""
    return extents_along(shape, np.broadcast_to(_UP, (len(R), 3)), R)


def rests_on_rows(R: np.ndarray, t: np.ndarray, shapes: list[Shape], n: int, surface: SupportSurface,
                  tolerance_m: float) -> np.ndarray:
    """:func:`rests_on` for object poses ``(R[m * n, 3, 3], t[m * n, 3])`` in
    the support's frame, rows ``j * n + k`` of object ``j`` with shape
    ``shapes[j]`` (one array pass for all): bool ``[m * n]``."""
    depth = np.concatenate([depth_below_centre_m(R[j * n:(j + 1) * n], shape) for j, shape in enumerate(shapes)]) \
        if len(set(shapes)) > 1 else depth_below_centre_m(R, shapes[0])
    over = (np.abs(t[:, 0]) <= surface.half_x_m) & (np.abs(t[:, 1]) <= surface.half_y_m)
    gap = t[:, 2] - depth - surface.top_z_m
    out: np.ndarray = over & (-tolerance_m <= gap) & (gap <= tolerance_m)
    return out
