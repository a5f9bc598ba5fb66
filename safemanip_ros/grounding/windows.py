"""Statistics of many short windows of samples at once.

A batch of windows is a padded array ``x[F, W, ...]`` (``F`` windows of at
most ``W`` samples, oldest first) with ``valid[F, W]`` saying which entries
are samples.  Every sum here is a running sum over the window axis, oldest
sample first (never numpy's pairwise summation, whose grouping depends on
the width), so a window's result is bit for bit the same whether it is
computed alone (a live frame) or among thousands (an offline rollout),
whatever the padding.  Rotations are ``[..., 3, 3]`` matrices,
rotation vectors axis × angle in radians.
"""

from __future__ import annotations

import numpy as np

from . import poses

__all__ = ['GROSS_SIGMAS', 'Windows', 'exp_rotations', 'last_valid', 'log_rotations', 'masked_fit', 'masked_mean', 'masked_median', 'masked_slope',
           'masked_sum',
           'mean_rotations', 'relative_logs', 'residual_sigma', 'trimmed_mean']


class Windows:
    """Index ranges ``[lo, hi)`` into sample arrays as padded windows:
    ``rows[F, W]`` (clipped into range where padded) and ``valid[F, W]``;
    ``keep`` [F, W] narrows ``valid`` further (samples a window leaves out)."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, keep: np.ndarray | None = None) -> None:
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        width = int((hi - lo).max()) if len(lo) else 0
        self.rows = lo[:, None] + np.arange(max(width, 1))[None, :]
        self.valid = self.rows < hi[:, None]
        self.rows = np.minimum(self.rows, np.maximum(hi - 1, 0)[:, None])
        if keep is not None:
            self.valid &= keep[self.rows]

    @property
    def count(self) -> np.ndarray:
        """Samples per window."""
        out: np.ndarray = self.valid.sum(axis=1)
        return out

    def last_only(self) -> None:
        """Keep only each window's newest valid sample."""
        newest = last_valid(self.valid)
        only = np.zeros_like(self.valid)
        only[np.arange(len(newest)), newest] = self.valid.any(axis=1)
        self.valid = only


def last_valid(valid: np.ndarray) -> np.ndarray:
    """Each window's newest valid entry, as a place on the window axis (the last place for an empty window)."""
    out: np.ndarray = valid.shape[1] - 1 - np.argmax(valid[:, ::-1], axis=1)
    return out


def masked_sum(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Sum over the window axis (1), oldest first, of the valid entries: a
    running sum (``accumulate`` adds in order, whatever the array's layout or
    the padding after the last sample), so the result does not depend on
    the batch a window is in."""
    shape = (valid.shape[0], valid.shape[1]) + (1,) * (x.ndim - 2)
    out: np.ndarray = np.add.accumulate(np.where(valid.reshape(shape), x, 0.0), axis=1)[:, -1]
    return out


def masked_mean(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The mean of each window's valid samples ``x[F, W, ...]`` (NaN for an empty window)."""
    n = valid.sum(axis=1).astype(float)
    shape = (len(n),) + (1,) * (x.ndim - 2)
    with np.errstate(invalid='ignore', divide='ignore'):
        out: np.ndarray = masked_sum(x, valid) / n.reshape(shape)
    return out


def masked_median(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The median of each window's valid samples ``x[F, W, d]`` per axis
    (a selection: the same whatever the batch or padding)."""
    # Sorted with the padding last (as +inf); the middle one or two of the n valid samples.  (numpy's
    # nanmedian takes a masked-array path for small arrays: 0.4 ms a call, most of a live frame.)
    ordered = np.sort(np.where(valid[:, :, None], x, np.inf), axis=1)
    n = valid.sum(axis=1)
    at = np.arange(len(n))
    lo, hi = np.maximum(n - 1, 0) // 2, np.maximum(n, 1) // 2
    out: np.ndarray = (ordered[at, lo] + ordered[at, hi]) / 2.0
    out[n == 0] = np.nan
    return out


def log_rotations(R: np.ndarray) -> np.ndarray:
    """Rotation vectors of rotations ``R[..., 3, 3]`` (angles below a half turn;
    a half turn takes its axis from the symmetric part)."""
    shape = R.shape[:-2]
    m = R.reshape(-1, 9)
    c = np.clip((m[:, 0] + m[:, 4] + m[:, 8] - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(c)
    w = np.stack([m[:, 7] - m[:, 5], m[:, 2] - m[:, 6], m[:, 3] - m[:, 1]], axis=1)
    s = np.sin(angle)
    scale = np.where(angle < 1e-9, 0.5, angle / (2.0 * np.where(s < 1e-6, 1.0, s)))
    out = w * scale[:, None]
    half_turn = (s < 1e-6) & (angle >= 1e-9)
    if half_turn.any():
        axis = np.sqrt(np.maximum(np.stack([m[:, 0], m[:, 4], m[:, 8]], axis=1) + 1.0, 0.0) / 2.0)
        out[half_turn] = (axis * angle[:, None])[half_turn]
    result: np.ndarray = out.reshape(shape + (3,))
    return result


def exp_rotations(v: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[..., 3, 3]`` of rotation vectors ``v[..., 3]`` (Rodrigues' formula)."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    angle = np.sqrt(x * x + y * y + z * z)
    tiny = angle < 1e-12
    a = np.where(tiny, 1.0, angle)
    x, y, z = x / a, y / a, z / a
    s, c1 = np.sin(angle), 1.0 - np.cos(angle)
    sx, sy, sz = s * x, s * y, s * z
    cxy, cxz, cyz = c1 * x * y, c1 * x * z, c1 * y * z
    R = np.stack([1.0 + c1 * (x * x - 1.0), -sz + cxy, sy + cxz,
                  sz + cxy, 1.0 + c1 * (y * y - 1.0), -sx + cyz,
                  -sy + cxz, sx + cyz, 1.0 + c1 * (z * z - 1.0)], axis=-1).reshape(v.shape[:-1] + (3, 3))
    if tiny.any():
        R[tiny] = np.eye(3)
    return R


def relative_logs(ref: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Rotation vectors of ``refᵀ R`` for ``ref[F, 3, 3]`` and each ``R[F, W, 3, 3]``: ``[F, W, 3]``."""
    return log_rotations(poses.mat_mul(np.swapaxes(ref, -1, -2)[:, None], R))


def mean_rotations(R: np.ndarray, valid: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The mean of each window's rotations ``R[F, W, 3, 3]``: ``ref[F]`` (one
    of them) turned by the mean of their rotation vectors from it (one step
    of the Karcher mean)."""
    return poses.mat_mul(ref, exp_rotations(masked_mean(relative_logs(ref, R), valid)))


def masked_fit(t: np.ndarray, x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares slopes of ``x[F, W, d]`` against ``t[F, W]`` over each
    window's valid samples (at least two, stamps not all equal): slope
    ``[F, d]``, √Sxx ``[F]`` and the residuals ``[F, W, d]``."""
    n = valid.sum(axis=1).astype(float)
    tc = t - (masked_sum(t, valid) / n)[:, None]
    sxx = masked_sum(tc * tc, valid)
    xc = x - masked_mean(x, valid)[:, None, :]
    b = masked_sum(tc[:, :, None] * xc, valid) / sxx[:, None]
    return b, np.sqrt(sxx), xc - tc[:, :, None] * b[:, None, :]


def correlated_spreads(t: np.ndarray, valid: np.ndarray, correlation_s: float) -> tuple[np.ndarray, np.ndarray]:
    """How many times wider a window's mean and least-squares slope spread
    when the samples' errors are correlated as ``exp(-|t_i - t_j| /
    correlation_s)`` than when they are independent: ``(mean[F], slope[F])``,
    factors on ``sigma / sqrt(n)`` and ``sigma / sqrt(Sxx)`` (exact for that
    correlation at the windows' own stamps ``t[F, W]``; 1 where
    ``correlation_s`` is 0).  A tracker's error drifts: averaging ten
    detections that share it does not divide it by three."""
    F = t.shape[0]
    if correlation_s <= 0:
        return np.ones(F), np.ones(F)
    n = valid.sum(axis=1).astype(float)
    with np.errstate(invalid='ignore', divide='ignore'):
        tc = np.where(valid, t - (masked_sum(t, valid) / n)[:, None], 0.0)
        rho = np.exp(-np.abs(t[:, :, None] - t[:, None, :]) / correlation_s) * (valid[:, :, None] & valid[:, None, :])
        mean = np.sqrt(rho.sum(axis=(1, 2)) / n)
        slope = np.sqrt(np.einsum('fi,fij,fj->f', tc, rho, tc) / (tc * tc).sum(axis=1))
    return np.where(n > 0, mean, 1.0), np.where(np.isfinite(slope), slope, 1.0)


def residual_sigma(resid: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The residual standard deviation per axis of a fit's ``resid[F, W, d]``
    (two parameters fitted per axis): ``[F]``, NaN with fewer than three samples."""
    n = valid.sum(axis=1).astype(float)
    with np.errstate(invalid='ignore', divide='ignore'):
        out: np.ndarray = np.where(n >= 3, np.sqrt(masked_sum((resid * resid).sum(axis=2), valid)
                                                   / ((n - 2) * resid.shape[2])), np.nan)
    return out


def masked_slope(t: np.ndarray, x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`masked_fit` with the residual standard deviation per axis ``[F]``
    (:func:`residual_sigma`) in place of the residuals."""
    b, root_sxx, resid = masked_fit(t, x, valid)
    return b, root_sxx, residual_sigma(resid, valid)


GROSS_SIGMAS = 6.0
"""A sample farther than this many noise deviations from its window's median is a gross outlier
(Gaussian noise in three axes gets there about once in a billion samples)."""


def trimmed_mean(x: np.ndarray, valid: np.ndarray, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """The mean of each window's valid points ``x[F, W, 3]`` leaving out the
    gross outliers: points farther than :data:`GROSS_SIGMAS` noise deviations
    (``noise`` per axis) from the window's median point (a mis-association,
    a depth hole).  With none left out (always, for Gaussian noise) it is
    the plain mean, bit for bit; where every point would be left out,
    none is.  Returns the mean ``[F, 3]`` and the points kept ``[F, W]``."""
    if noise <= 0:
        return masked_mean(x, valid), valid
    centre = masked_median(x, valid)
    d = x - centre[:, None, :]
    near = np.sqrt((d * d).sum(axis=2)) <= GROSS_SIGMAS * noise
    kept = valid & near
    kept = np.where(kept.any(axis=1)[:, None], kept, valid)
    return masked_mean(x, kept), kept
