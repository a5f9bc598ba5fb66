"""Rigid transforms over arrays: many poses at once.

A batch of poses is a pair ``(R, t)``: rotations ``R[..., 3, 3]`` and
translations ``t[..., 3]`` (metres).  Every function here works elementwise
over the leading axes and spells out its sums in a fixed order instead of
calling ``@`` / BLAS, so the pose of one frame comes out bit for bit the
same whether it is computed alone (a live frame) or among ten thousand (an
offline rollout): live and offline grounding share these functions and
cannot drift apart.  Quaternions are ``(x, y, z, w)``, as in
``geometry_msgs/Quaternion``.
"""

from __future__ import annotations

import numpy as np

# Quaternions this close to each other are interpolated linearly (then
# normalised) instead of spherically: sin(theta) would lose precision.
SLERP_LINEAR_ABOVE = 0.9995


def quat_to_rot(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[..., 3, 3]`` of quaternions ``[..., 4]`` (x, y, z, w),
    normalised first."""
    n = np.sqrt(q[..., 0] * q[..., 0] + q[..., 1] * q[..., 1] + q[..., 2] * q[..., 2] + q[..., 3] * q[..., 3])
    x, y, z, w = q[..., 0] / n, q[..., 1] / n, q[..., 2] / n, q[..., 3] / n
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - z * w)
    R[..., 0, 2] = 2 * (x * z + y * w)
    R[..., 1, 0] = 2 * (x * y + z * w)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - x * w)
    R[..., 2, 0] = 2 * (x * z - y * w)
    R[..., 2, 1] = 2 * (y * z + x * w)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def _normalised(q: np.ndarray) -> np.ndarray:
    n = np.sqrt(q[..., 0] * q[..., 0] + q[..., 1] * q[..., 1] + q[..., 2] * q[..., 2] + q[..., 3] * q[..., 3])
    out: np.ndarray = q / n[..., None]
    return out


def slerp(q0: np.ndarray, q1: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Spherical interpolation from ``q0`` (a = 0) to ``q1`` (a = 1) along the
    shorter arc, ``[..., 4]`` each, ``a[...]``."""
    q0, q1 = _normalised(q0), _normalised(q1)
    dot = q0[..., 0] * q1[..., 0] + q0[..., 1] * q1[..., 1] + q0[..., 2] * q1[..., 2] + q0[..., 3] * q1[..., 3]
    flip = dot < 0
    q1 = np.where(flip[..., None], -q1, q1)
    dot = np.where(flip, -dot, dot)
    linear = dot > SLERP_LINEAR_ABOVE
    a_ = a[..., None]
    lerp = _normalised(q0 + a_ * (q1 - q0))
    theta = np.arccos(np.where(linear, 0.0, dot))        # no arccos of a value that will not be used
    sin_theta = np.where(linear, 1.0, np.sin(theta))
    arc = (np.sin((1 - a) * theta)[..., None] * q0 + np.sin(a * theta)[..., None] * q1) / sin_theta[..., None]
    return np.where(linear[..., None], lerp, arc)


def mat_mul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` for ``[..., 3, 3]`` batches, summed in a fixed order."""
    out: np.ndarray = (A[..., :, 0, None] * B[..., None, 0, :] + A[..., :, 1, None] * B[..., None, 1, :]
                       + A[..., :, 2, None] * B[..., None, 2, :])
    return out


def mat_vec(A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``A @ v`` for ``[..., 3, 3]`` and ``[..., 3]`` batches."""
    out: np.ndarray = A[..., :, 0] * v[..., None, 0] + A[..., :, 1] * v[..., None, 1] + A[..., :, 2] * v[..., None, 2]
    return out


def compose(Ra: np.ndarray, ta: np.ndarray, Rb: np.ndarray, tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pose ``a ∘ b`` (b expressed in a's parent): ``(Ra Rb, Ra tb + ta)``."""
    return mat_mul(Ra, Rb), mat_vec(Ra, tb) + ta


def invert(R: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of a rigid pose: ``(Rᵀ, −Rᵀ t)``."""
    Rt = np.swapaxes(R, -1, -2)
    return Rt, -mat_vec(Rt, t)


def norm3(v: np.ndarray) -> np.ndarray:
    """Euclidean length of ``[..., 3]`` vectors."""
    out: np.ndarray = np.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1] + v[..., 2] * v[..., 2])
    return out


def relative_angle(Ra: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    """Angle (rad) of the rotation ``Raᵀ Rb`` taking ``Ra`` to ``Rb``."""
    # trace(Raᵀ Rb) is the sum of the elementwise products: row sums, then their sum.
    p = Ra * Rb
    rows = p[..., 0] + p[..., 1] + p[..., 2]
    tr = rows[..., 0] + rows[..., 1] + rows[..., 2]
    out: np.ndarray = np.arccos(np.clip((tr - 1) / 2, -1.0, 1.0))
    return out


def to_matrix(R: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Homogeneous ``[..., 4, 4]`` matrices of poses."""
    T = np.zeros(R.shape[:-2] + (4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = t
    T[..., 3, 3] = 1.0
    return T
