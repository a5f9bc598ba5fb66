"""Is an object-pose source good enough for the configured thresholds?

``safemanip doctor`` reads each configured object frame's transforms from a
recording and measures what the grounding assumes of them
(:class:`~.tracking.TrackConfig`): how often they come (the median interval's rate, the 95th percentile gap),
how late (publication minus capture stamp: the bag's receive time minus the
header stamp), and how noisy — the scatter about a straight line of the
detections in one-second windows where the object stands still (fitted
speed under :data:`STILL_M_S`), the median over those windows — and how
often a detection is grossly wrong: farther than :data:`OUTLIER_SIGMAS`
noise deviations from the median of its neighbours (a mis-association, a
pose flip, a depth hole; smooth motion keeps a detection at its neighbours'
median) — and how long its error stays correlated: over stretches of two
or more consecutive still windows, the error about the stretch's mean
position, its lag-one autocorrelation read as ``exp(-interval /
correlation)`` (:data:`CORRELATED_S`).  Each figure beyond what the
configuration allows is a problem in words.

Lengths in metres, times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .tracking import MIN_MOTION_SAMPLES, TrackConfig, slope

STILL_M_S = 0.05
"""A window whose fitted speed is under this counts as the object standing still."""
GAP_PERCENTILE = 95.0
"""Gaps are judged at this percentile: a grasp hides the object for a while, and vouches for it meanwhile."""
NOISE_WINDOW_S = 1.0
TOO_NOISY = 1.5
"""Measured noise more than this many times the configured one is a problem."""
OUTLIER_NEIGHBOURS = 2
"""A detection is compared with the median of this many detections on each side of it (and itself)."""
OUTLIER_SIGMAS = 6.0
"""A detection farther than this many noise deviations from its neighbours' median is a gross outlier
(Gaussian noise gets there about once in a billion detections)."""
OUTLIER_SHARE_LIMIT = 0.01
"""More gross outliers than this share of the detections is a problem: each reads as a jump of the object."""


CORRELATED_S = 0.3
"""An error correlated for longer than this (and than ``perception.correlation_s`` allows) is a problem:
averaging detections that share it does not shrink it."""
CORRELATION_FLOOR_M = 0.001
"""Poses whose noise (or whose still stretch's scatter) is under this have no error worth judging for
correlation: exact poses (a simulator's) or a tracker better than a millimetre."""
STRETCH_WINDOWS = 2
"""Consecutive still windows a stretch needs for the error's correlation to be measured."""


@dataclass
class PoseSourceQuality:
    """What one object frame's recorded poses show."""

    frame: str
    detections: int
    rate_hz: float
    latency_s: float | None          # median receive time minus capture stamp
    longest_gap_s: float             # at GAP_PERCENTILE
    noise_m: float | None            # median scatter per axis over still windows (None: no still window)
    still_windows: int
    problems: list[str] = field(default_factory=list)
    outlier_share: float | None = None     # detections grossly off their neighbours (None: too few to say)
    correlation_s: float | None = None     # how long the error stays correlated (None: no long still stretch)


MIN_RATE_POSES = 10
"""Fewer poses than this cannot estimate a rate (2 poses 50 ms apart in 3 s are not a 20 Hz source)."""
FUTURE_TOLERANCE_S = 0.05
"""A pose stamped more than this after it was received is stamped in the future (clock skew, wrong clock)."""


def _input_problems(stamps_s: np.ndarray, received_s: np.ndarray, positions_m: np.ndarray) -> list[str]:
    """What makes poses unusable before any figure is measured: non-finite
    values, stamps after their arrival, stamps going backwards in arrival order."""
    problems = []
    n = len(stamps_s)
    bad = ~np.isfinite(positions_m).all(axis=1) | ~np.isfinite(stamps_s)
    if bad.any():
        problems.append(f'{int(bad.sum())} of {n} poses are not finite numbers (NaN or infinite)'
                        + (': none can be used' if bad.all() else ': each is read as no detection'))
    ahead = stamps_s - received_s
    future = np.isfinite(ahead) & (ahead > FUTURE_TOLERANCE_S)
    if future.any():
        problems.append(f'{int(future.sum())} of {n} poses are stamped up to {float(np.nanmax(ahead[future])):.2f} s '
                        'after they arrived (a clock ahead, or stamps in the future): freshness cannot be judged')
    arrival = np.argsort(received_s, kind='stable')
    backwards = int((np.diff(stamps_s[arrival]) < 0).sum()) if n > 1 else 0
    if backwards:
        problems.append(f'stamps go backwards {backwards} time(s) in arrival order (a detector resetting its '
                        'clock, or two sources on one frame)')
    return problems


def assess(frame: str, stamps_s: np.ndarray, received_s: np.ndarray, positions_m: np.ndarray,
           track: TrackConfig) -> PoseSourceQuality:
    """Measure one frame's poses (stamps, receive times [n], positions [n, 3])
    against ``track``; unusable poses (non-finite, stamped in the future)
    are problems, and left out of the figures."""
    stamps_s, received_s = np.asarray(stamps_s, float), np.asarray(received_s, float)
    positions_m = np.asarray(positions_m, float).reshape(-1, 3)
    problems = _input_problems(stamps_s, received_s, positions_m)
    usable = np.isfinite(positions_m).all(axis=1) & np.isfinite(stamps_s) & np.isfinite(received_s)
    stamps_s, received_s, positions_m = stamps_s[usable], received_s[usable], positions_m[usable]
    order = np.argsort(stamps_s, kind='stable')
    t, recv, p = stamps_s[order], received_s[order], positions_m[order]
    n = len(t)
    if n < 2:
        return PoseSourceQuality(frame, n, 0.0, None, math.inf, None, 0, problems + [
            f'{n} usable pose(s) of this frame on /tf in the recording: nothing to judge'])
    span = float(t[-1] - t[0])
    if n < MIN_RATE_POSES:
        rate = (n - 1) / span if span > 0 else 0.0
        return PoseSourceQuality(frame, n, rate, float(np.median(recv - t)), span, None, 0, problems + [
            f'only {n} usable poses over {span:.2f} s: too few to estimate a rate (at least {MIN_RATE_POSES})'])
    gaps = np.diff(t)
    typical = float(np.median(gaps))
    rate = 1.0 / typical if typical > 0 else math.inf        # the detector's own rate, misses aside
    longest = float(np.percentile(gaps, GAP_PERCENTILE))
    latency = float(np.median(recv - t))
    sigmas = []
    runs: list[list[int]] = []      # consecutive still windows: [first index, end index, windows]
    was_still = False
    start = 0
    while start < n:
        end = int(np.searchsorted(t, t[start] + NOISE_WINDOW_S, 'left'))
        still = False
        if end - start >= 5 and t[end - 1] > t[start]:
            v, _, resid = slope(t[start:end], p[start:end])
            if float(np.linalg.norm(v)) < STILL_M_S and not math.isnan(resid):
                sigmas.append(resid)
                still = True
        if still and was_still:
            runs[-1][1:] = [end, runs[-1][2] + 1]
        elif still:
            runs.append([start, end, 1])
        was_still = still
        start = max(end, start + 1)
    noise = float(np.median(sigmas)) if sigmas else None
    q = PoseSourceQuality(frame, n, rate, latency, longest, noise, len(sigmas), problems)
    # Exact poses (a simulator's) scatter by nothing: what moves them in a "still" stretch is motion, not error.
    if noise is not None and noise >= CORRELATION_FLOOR_M:
        q.correlation_s = _correlation_s(t, p, [(lo, hi) for lo, hi, windows in runs if windows >= STRETCH_WINDOWS])
    sigma = max(track.position_noise_m, noise or 0.0, 1e-4)
    far = outliers(p, sigma)
    if far is not None:
        q.outlier_share = float(far.mean())
        if q.outlier_share > OUTLIER_SHARE_LIMIT:
            q.problems.append(f'{int(far.sum())} of {n} poses ({q.outlier_share:.1%}) are gross outliers, more than '
                              f'{OUTLIER_SIGMAS:g} x {sigma * 1000:.1f} mm from the median of their neighbours (a '
                              f'mis-association, a pose flip, a depth hole): each reads as a jump of the object; '
                              f'more than {OUTLIER_SHARE_LIMIT:.0%} is too many')
    if noise is not None and noise > TOO_NOISY * max(track.position_noise_m, 1e-4):
        q.problems.append(f'noise {noise * 1000:.1f} mm per axis while standing still, more than '
                          f'perception.position_noise_m ({track.position_noise_m * 1000:.1f} mm): set it to '
                          f'{math.ceil(noise * 1000) / 1000:g} (motion is then decided more slowly)')
    if q.correlation_s is not None and q.correlation_s > max(CORRELATED_S, 1.5 * track.correlation_s):
        q.problems.append(f'the error stays correlated for about {q.correlation_s:.1f} s while standing still (a '
                          f'tracker\'s drift), beyond perception.correlation_s ({track.correlation_s:g} s): set it to '
                          f'{math.ceil(q.correlation_s * 10) / 10:g}, or an average of detections is trusted beyond '
                          f'what they share')
    if rate * track.window_s < MIN_MOTION_SAMPLES:
        q.problems.append(f'{rate:.1f} Hz gives fewer than {MIN_MOTION_SAMPLES} poses per perception.window_s '
                          f'({track.window_s:g} s): raise window_s to {MIN_MOTION_SAMPLES / max(rate, 1e-3):.2f} s')
    if latency is not None and latency > track.staleness_s:
        q.problems.append(f'poses arrive {latency:.2f} s after their stamp, beyond perception.staleness_s '
                          f'({track.staleness_s:g} s): the object reads unknown')
    if longest > track.staleness_s:
        q.problems.append(f'{GAP_PERCENTILE:g} % of the gaps between poses are up to {longest:.2f} s, beyond '
                          f'perception.staleness_s '
                          f'({track.staleness_s:g} s): the object reads unknown meanwhile')
    return q


def _correlation_s(t: np.ndarray, p: np.ndarray, stretches: list[tuple[int, int]]) -> float | None:
    """The error's correlation time over still ``stretches`` (index bounds
    into stamps ``t`` and positions ``p``): the pooled lag-one
    autocorrelation of the positions about each stretch's mean, as
    ``-interval / ln(rho)`` at the median interval; 0 for no positive
    correlation; None without a stretch, or where the positions scatter
    less than :data:`CORRELATION_FLOOR_M` (nothing worth judging)."""
    num = den = 0.0
    count = 0
    intervals = []
    for lo, hi in stretches:
        x = p[lo:hi] - p[lo:hi].mean(axis=0)
        num += float((x[1:] * x[:-1]).sum())
        den += float((x * x).sum())
        count += x.size
        intervals.append(np.diff(t[lo:hi]))
    if not stretches or den <= count * CORRELATION_FLOOR_M ** 2:
        return None
    rho = num / den
    dt = float(np.median(np.concatenate(intervals)))
    return 0.0 if rho <= 0 else (math.inf if rho >= 1 else -dt / math.log(rho))


def outliers(positions_m: np.ndarray, sigma_m: float) -> np.ndarray | None:
    """Which detections ``positions_m[n, 3]`` (in stamp order) are farther
    than :data:`OUTLIER_SIGMAS` x ``sigma_m`` (per axis) from the median of
    the :data:`OUTLIER_NEIGHBOURS` on each side and themselves; None with too
    few detections to say (fewer than a full neighbourhood)."""
    k = OUTLIER_NEIGHBOURS
    n = len(positions_m)
    if n < 2 * k + 1:
        return None
    windows = np.stack([positions_m[i:n - 2 * k + i] for i in range(2 * k + 1)], axis=1)     # [n - 2k, 2k + 1, 3]
    median = np.median(windows, axis=1)
    far = np.zeros(n, bool)
    far[k:n - k] = np.linalg.norm(positions_m[k:n - k] - median, axis=1) > OUTLIER_SIGMAS * sigma_m
    return far


def assess_bag(path: str | Path, frames: list[str], track: TrackConfig) -> list[PoseSourceQuality]:
    """:func:`assess` for each of ``frames`` from the ``/tf`` messages of the bag at ``path``."""
    from ..bag import open_bag, typestore
    from ..stamps import stamp_s
    ts = typestore()
    wanted = set(frames)
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {f: [] for f in frames}
    with open_bag(path) as bag:
        conns = [c for c in bag.connections if c.topic == '/tf' and c.msgtype == 'tf2_msgs/msg/TFMessage']
        for _, t_ns, raw in bag.messages(conns):
            msg = ts.deserialize_cdr(raw, 'tf2_msgs/msg/TFMessage')
            for tr in msg.transforms:
                if tr.child_frame_id in wanted:
                    v, q = tr.transform.translation, tr.transform.rotation
                    # A pose with a rotation that is not finite is not a pose: its position is left out too.
                    ok = all(math.isfinite(c) for c in (q.x, q.y, q.z, q.w))
                    rows[tr.child_frame_id].append((stamp_s(tr.header.stamp), t_ns * 1e-9,
                                                    *((v.x, v.y, v.z) if ok else (math.nan,) * 3)))
    out = []
    for frame in frames:
        a = np.array(rows[frame], dtype=float).reshape(-1, 5)
        out.append(assess(frame, a[:, 0], a[:, 1], a[:, 2:], track))
    return out
