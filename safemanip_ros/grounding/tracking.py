"""An object's pose as a measurement: what its detections over a time
window say, fused with the exact gripper while the object is grasped.

Object poses on a real cell come from a detector: noisy, at a lower rate
than the frames, stamped at capture and published late, missing while the
fingers hide the object.  :class:`ObjectTrack` keeps one object's
detections (*measurements*: the object's pose in the world and relative to
the gripper, both at the detection's own stamp, so latency does not read
as motion) and answers, frame by frame:

* **pose**: while the object is grasped (the contacts, exact, say so) and
  its grip offset has been measured, the gripper's pose now composed with
  the mean measured offset; after the grasp ends, that pose frozen at the
  last grasped frame until a detection captured after it arrives;
  otherwise the detections of the current *regime* (since the grasp began
  or ended) within ``window_s``: their mean while the object is still, the
  newest while it moves.  Unknown once the newest detection is older than
  ``staleness_s`` (and no grasp vouches for it).
* **motion**: while grasped, the gripper's own motion (exact, frame to
  frame) — horizontally no faster than the detections themselves move (a
  grasped object pressed on a support can stay while the hand moves);
  otherwise a least-squares slope of the measurements against their
  stamps over the window, with its standard error from the configured
  noise or, when larger, the fit's residuals.  Deciding *stable* and
  *sliding* uses hysteresis: a state is left only on evidence beyond the
  noise floor (:data:`NOISE_QUANTILE`), re-entered within half of it.
* **slip** (sync): the mean offset of the newest detections in the window
  against the mean of the first ``REFERENCE_MEASUREMENTS`` after grasp
  onset; slipped only when the difference exceeds the limit by the noise
  floor.  A grasped object not seen since the reference is synced: the
  fingers (contacts and closed joints) hold it.

Lengths in metres, angles in radians, times in seconds.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

REFERENCE_MEASUREMENTS = 3
"""Detections after grasp onset averaged into the slip reference."""
RECENT_MEASUREMENTS = 3
"""Newest detections compared with the slip reference."""
OFFSET_HORIZON_S = 2.0
"""A grasped object's grip offset is the mean of its detections since the
grasp began, over at most this long (the gripper is exact: only the
detector's noise is averaged)."""
MIN_MOTION_SAMPLES = 3
"""Detections a motion estimate is fitted to at least (older ones are taken when the window has fewer)."""
MIN_SCATTER_SAMPLES = 4
"""Samples from which noise is estimated from their own scatter (fewer: the configured noise)."""
NOISE_QUANTILE = {1: 3.29, 2: 3.72, 3: 4.03}
"""The 99.9 % quantile of the norm of a d-dimensional standard normal
vector: evidence must exceed this many standard errors (a still object
read at 20 Hz then reads as moving about once a minute, not every second)."""


@dataclass(frozen=True)
class TrackConfig:
    """How object detections are read.

    ``window_s``: the time window motion is estimated over (longer: less
    noise, later to react); ``staleness_s``: an object not detected for
    longer is unknown; ``support_staleness_s``: how long a support's last
    detected pose is kept (something is often set down on it while the
    gripper hides it; supports stand still); ``position_noise_m`` and ``orientation_noise_rad``:
    the detector's standard deviation per axis (the fit's residuals are
    used instead when larger; 0 for exact poses)."""

    window_s: float = 0.5
    staleness_s: float = 0.5
    support_staleness_s: float = 2.0
    position_noise_m: float = 0.005
    orientation_noise_rad: float = 0.035


@dataclass
class Measurement:
    """One detection: its stamp, the object in the world, and in the
    gripper at that stamp (``rel_ok`` False: the gripper's pose then is unknown)."""

    stamp_s: float
    p_w: np.ndarray
    R_w: np.ndarray
    p_g: np.ndarray
    R_g: np.ndarray
    rel_ok: bool


@dataclass
class Estimate:
    """An object's state at one frame (``known`` False: nothing else counts).
    Speeds are None when the motion is unknown; ``*_floor`` is the noise
    floor evidence must exceed; ``position_se_m`` the position's standard error."""

    known: bool = False
    p_w: np.ndarray = field(default_factory=lambda: np.zeros(3))
    R_w: np.ndarray = field(default_factory=lambda: np.eye(3))
    speed_m_s: float | None = None
    horizontal_m_s: float | None = None
    angular_rad_s: float | None = None
    speed_floor_m_s: float = 0.0
    horizontal_floor_m_s: float = 0.0
    angular_floor_rad_s: float = 0.0
    position_se_m: float = 0.0
    from_gripper: bool = False       # the gripper's pose and the grip offset, not a detection
    samples: int = 0                 # detections the motion is fitted to (0: the gripper's exact motion)
    detected_horizontal_m_s: float | None = None   # while grasped: the detections' own horizontal speed


def _mean_rows(a: np.ndarray) -> np.ndarray:
    """``a.mean(axis=0)``, the same arithmetic without its bookkeeping (the tracker's arrays are a few rows)."""
    out: np.ndarray = np.add.reduce(a, axis=0) / len(a)
    return out


def _length(v: np.ndarray) -> float:
    """``np.linalg.norm`` of a vector, the same arithmetic."""
    return math.sqrt(float(v.dot(v)))


def log_rotation(R: np.ndarray) -> np.ndarray:
    """The rotation vector (axis × angle, rad) of a rotation matrix."""
    c = max(-1.0, min(1.0, (float(np.trace(R)) - 1.0) / 2.0))
    angle = math.acos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if angle < 1e-9:
        return w / 2.0
    s = math.sin(angle)
    if s < 1e-6:       # a half turn: the axis from the symmetric part
        axis = np.sqrt(np.maximum(np.diag(R) + 1.0, 0.0) / 2.0)
        return axis * angle
    return w * (angle / (2.0 * s))


def log_rotations(R: np.ndarray) -> np.ndarray:
    """:func:`log_rotation` of rotations ``R[n, 3, 3]`` at once (angles below a half turn)."""
    m = R.reshape(len(R), 9)
    c = np.clip((m[:, 0] + m[:, 4] + m[:, 8] - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(c)
    w = np.empty((len(R), 3))
    np.subtract(m[:, 7], m[:, 5], out=w[:, 0])
    np.subtract(m[:, 2], m[:, 6], out=w[:, 1])
    np.subtract(m[:, 3], m[:, 1], out=w[:, 2])
    s = np.sin(angle)
    near_half_turn = (s < 1e-6) & (angle >= 1e-9)
    scale = np.where(angle < 1e-9, 0.5, angle / (2.0 * np.where(s < 1e-6, 1.0, s)))
    out = w * scale[:, None]
    if near_half_turn.any():
        for i in np.flatnonzero(near_half_turn):
            out[i] = log_rotation(R[i])
    return out


def exp_rotation(v: np.ndarray) -> np.ndarray:
    """The rotation matrix of a rotation vector (axis × angle, rad): Rodrigues' formula."""
    x, y, z = v.tolist()
    angle = math.sqrt(x * x + y * y + z * z)
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = x / angle, y / angle, z / angle
    s, c1 = math.sin(angle), 1.0 - math.cos(angle)
    # I + sin K + (1 - cos) K², K the cross-product matrix of the unit axis (K² = a aᵀ - I).
    return np.array([[1.0 + c1 * (x * x - 1.0), -s * z + c1 * x * y, s * y + c1 * x * z],
                     [s * z + c1 * x * y, 1.0 + c1 * (y * y - 1.0), -s * x + c1 * y * z],
                     [-s * y + c1 * x * z, s * x + c1 * y * z, 1.0 + c1 * (z * z - 1.0)]])


def mean_rotation(Rs: list[np.ndarray] | np.ndarray) -> np.ndarray:
    """The mean of nearby rotations: the last one turned by the mean of the
    others' rotation vectors from it (one step of the Karcher mean; exact
    for rotations about one axis, and for a detector's few degrees of noise
    indistinguishable from the full iteration)."""
    R = np.asarray(Rs)
    ref = R[-1]
    out: np.ndarray = ref @ exp_rotation(_mean_rows(log_rotations(np.einsum('ji,njk->nik', ref, R))))
    return out


def slope(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Least-squares slope of ``x[n, d]`` against ``t[n]`` (n ≥ 2, stamps not
    all equal): (slope [d], √Sxx, residual standard deviation per axis, NaN
    with fewer than three samples)."""
    n = len(t)
    tc = t - float(np.add.reduce(t)) / n
    sxx = float(tc.dot(tc))
    xc = x - _mean_rows(x)
    b = tc.dot(xc) / sxx
    if n < 3:
        return b, math.sqrt(sxx), math.nan
    resid = xc - tc[:, None] * b
    return b, math.sqrt(sxx), math.sqrt(float(np.add.reduce((resid * resid).ravel())) / ((n - 2) * x.shape[1]))


class _Detections:
    """A track's detections in stamp order, as growing arrays: a window is a
    slice.  Rows are never written twice (growing allocates anew), so an
    array handed out stays as it was."""

    def __init__(self) -> None:
        self.stamps: list[float] = []         # from ``first``; stamps only grow
        self.first = 0                        # the oldest kept, as an index into ``stamps``
        cap = 64
        self.p_w, self.R_w = np.empty((cap, 3)), np.empty((cap, 3, 3))
        self.p_g, self.R_g = np.empty((cap, 3)), np.empty((cap, 3, 3))
        self.rel_ok = np.zeros(cap, bool)

    def __len__(self) -> int:
        return len(self.stamps)

    def append(self, m: Measurement) -> None:
        n = len(self.stamps)
        if n == len(self.rel_ok):
            keep = slice(self.first, n)
            self.stamps = self.stamps[self.first:]
            n -= self.first
            self.first = 0
            cap = max(64, 2 * n)
            for name in ('p_w', 'R_w', 'p_g', 'R_g', 'rel_ok'):
                old = getattr(self, name)
                new = np.zeros((cap,) + old.shape[1:], old.dtype)
                new[:n] = old[keep]
                setattr(self, name, new)
        self.stamps.append(m.stamp_s)
        self.p_w[n], self.R_w[n], self.p_g[n], self.R_g[n], self.rel_ok[n] = m.p_w, m.R_w, m.p_g, m.R_g, m.rel_ok

    def since(self, stamp_s: float) -> int:
        """The index of the first kept detection stamped at or after ``stamp_s``."""
        return bisect.bisect_left(self.stamps, stamp_s, self.first)

    def relative(self, lo: int, hi: int | None = None) -> list[int]:
        """The indices in ``[lo, hi)`` of detections with the gripper's pose known."""
        hi = len(self.stamps) if hi is None else hi
        rows: list[int] = (np.flatnonzero(self.rel_ok[lo:hi]) + lo).tolist()
        return rows


class ObjectTrack:
    """One object's detections and grasp state, frame by frame (see the module docstring)."""

    def __init__(self, config: TrackConfig) -> None:
        self.config = config
        self._seen = _Detections()
        self.last_stamp_s = -math.inf           # the newest measurement taken in
        self.regime_start_s = -math.inf         # measurements before are of another regime
        self.grasping = False
        self.onset_s = 0.0
        self.reference: tuple[np.ndarray, np.ndarray, int] | None = None   # mean offset (p, R), how many
        self._reference_parts: list[Measurement] = []
        self.ungrasped_frames = 0
        self.held_pose: tuple[np.ndarray, np.ndarray, float, float] | None = None  # (p, R, time, se) at the grasp's end
        self.last_fused: tuple[np.ndarray, np.ndarray, float, float] | None = None
        self.stable: bool | None = None
        self.sliding: bool | None = None
        self._decided_on = 0        # detections in the fit that last decided (stable, sliding)
        self._means: dict[str, tuple[tuple[float, float, int, bool], tuple[np.ndarray, np.ndarray]]] = {}

    def add(self, m: Measurement) -> None:
        """Take in a detection (one not newer than the newest taken is ignored)."""
        if m.stamp_s <= self.last_stamp_s:
            return
        self.last_stamp_s = m.stamp_s
        self._seen.append(m)
        if self.grasping and m.stamp_s >= self.onset_s:
            self._add_reference(m)

    def grasp(self, code: int, now_s: float) -> None:
        """This frame's grasp state: 1 grasped, 0 not, else unknown or no input."""
        if code == 1:
            self.ungrasped_frames = 0
            if not self.grasping:
                self.grasping, self.onset_s = True, now_s
                self.reference, self._reference_parts = None, []
                self.regime_start_s = now_s
            self.held_pose = None
        elif code == 0:
            self.ungrasped_frames += 1
            if self.grasping and self.ungrasped_frames == 1 and self.last_fused is not None:
                # The fingers let go (maybe for one frame): the object is where the gripper last
                # held it until a detection captured after that says otherwise.
                self.held_pose = self.last_fused
                self.regime_start_s = self.last_fused[2]
                self.stable = self.sliding = None
            # The grasp (and its slip reference) survives a one-frame contact dropout.
            if self.grasping and self.ungrasped_frames >= 2:
                self.grasping = False
                self.reference, self._reference_parts = None, []

    def _add_reference(self, m: Measurement) -> None:
        if m.rel_ok and len(self._reference_parts) < self._averaged(REFERENCE_MEASUREMENTS):
            self._reference_parts.append(m)
            parts = self._reference_parts
            self.reference = (_mean_rows(np.array([p.p_g for p in parts])),
                              mean_rotation(np.array([p.R_g for p in parts])), len(parts))

    def _mean_pose(self, rows: list[int], slot: str, relative: bool) -> tuple[np.ndarray, np.ndarray]:
        """The mean position and rotation of the detections ``rows`` (in the
        gripper when ``relative``, else in the world), remembered per
        ``slot`` while the same detections are asked for (frames between detections)."""
        seen = self._seen
        key = (seen.stamps[rows[0]], seen.stamps[rows[-1]], len(rows), relative)     # a track's stamps only grow
        hit = self._means.get(slot)
        if hit is not None and hit[0] == key:
            return hit[1]
        p, R = (seen.p_g, seen.R_g) if relative else (seen.p_w, seen.R_w)
        if len(rows) == 1:
            value = (p[rows[0]].copy(), R[rows[0]].copy())
        else:
            value = (_mean_rows(p[rows]), mean_rotation(R[rows]))
        self._means[slot] = (key, value)
        return value

    def _averaged(self, count: int) -> int:
        """How many detections to average where ``count`` would be: one for exact poses."""
        return count if self.config.position_noise_m > 0 or self.config.orientation_noise_rad > 0 else 1

    def _window(self, now_s: float) -> tuple[int, int]:
        """The detections of the current regime within ``window_s`` of
        ``now_s``, as an index range (older ones past every horizon are dropped)."""
        cfg, seen = self.config, self._seen
        keep_from = now_s - max(cfg.window_s, cfg.staleness_s, OFFSET_HORIZON_S)
        if seen.first < len(seen) and seen.stamps[seen.first] < keep_from:
            seen.first = seen.since(keep_from)
        return seen.since(max(now_s - cfg.window_s, self.regime_start_s)), len(seen)

    def estimate(self, now_s: float, gripper: tuple[np.ndarray, np.ndarray] | None,
                 gripper_motion: tuple[float, float, float] | None) -> Estimate:
        """The object's state at ``now_s`` given the gripper's pose in the
        world now (None: unknown) and its motion (speed, horizontal speed,
        angular speed; None: unknown)."""
        cfg, seen = self.config, self._seen
        window = self._window(now_s)
        if self.grasping and self.ungrasped_frames == 0 and gripper is not None:
            est = self._from_gripper(now_s, gripper, window)
            if est is not None:
                if gripper_motion is not None:
                    est.speed_m_s, est.horizontal_m_s, est.angular_rad_s = gripper_motion
                est.detected_horizontal_m_s = self._detected_horizontal(window)
                self.last_fused = (est.p_w, est.R_w, now_s, est.position_se_m)
                return est
        if self.held_pose is not None:
            if not (window[1] > window[0] and seen.stamps[window[1] - 1] > self.held_pose[2]):
                p, R, t_end, se = self.held_pose
                if now_s - t_end > cfg.staleness_s:
                    return Estimate()
                return Estimate(True, p, R, position_se_m=se, from_gripper=True)
            self.held_pose = None
        est = self._from_detections(now_s, window)
        held = self.grasping and self.ungrasped_frames == 0
        if held and est.known and gripper_motion is not None:
            # Grasped before its offset is measured: it moves with the gripper.
            est.speed_m_s, est.horizontal_m_s, est.angular_rad_s = gripper_motion
            est.speed_floor_m_s = est.horizontal_floor_m_s = est.angular_floor_rad_s = 0.0
            est.samples = 0
        if held and est.known:
            self.last_fused = (est.p_w, est.R_w, now_s, est.position_se_m)
        return est

    def _from_gripper(self, now_s: float, gripper: tuple[np.ndarray, np.ndarray],
                      window: tuple[int, int]) -> Estimate | None:
        """A grasped object's pose: the gripper's now composed with the mean
        grip offset measured since the grasp began (None: never measured)."""
        seen = self._seen
        rows = seen.relative(seen.since(max(self.onset_s, now_s - OFFSET_HORIZON_S)))
        if rows:
            rows = rows[-self._averaged(len(rows)):]
            off_p, off_R = self._mean_pose(rows, 'offset', relative=True)
            spread = self._spread(seen.p_g[rows])
        elif self._reference_parts:
            parts = self._reference_parts[-self._averaged(len(self._reference_parts)):]
            off_p, off_R = self._parts_mean(parts)
            spread = self._spread(np.array([m.p_g for m in parts]))
        else:
            # Not seen since the fingers closed: where it was last seen relative to the gripper.
            rows = seen.relative(seen.since(now_s - OFFSET_HORIZON_S))[-RECENT_MEASUREMENTS:]
            if not rows:
                return None
            rows = rows[-self._averaged(len(rows)):]
            off_p, off_R = self._mean_pose(rows, 'offset', relative=True)
            spread = self._spread(seen.p_g[rows])
        GR, Gp = gripper
        return Estimate(True, GR @ off_p + Gp, GR @ off_R, position_se_m=spread, from_gripper=True)

    def _parts_mean(self, parts: list[Measurement]) -> tuple[np.ndarray, np.ndarray]:
        """The mean grip offset of the slip reference's detections ``parts``."""
        key = (parts[0].stamp_s, parts[-1].stamp_s, len(parts), True)
        hit = self._means.get('offset')
        if hit is not None and hit[0] == key:
            return hit[1]
        value = (parts[0].p_g, parts[0].R_g) if len(parts) == 1 else \
            (_mean_rows(np.array([m.p_g for m in parts])), mean_rotation(np.array([m.R_g for m in parts])))
        self._means['offset'] = (key, value)
        return value

    def _detected_horizontal(self, window: tuple[int, int]) -> float | None:
        """The horizontal speed the newest :data:`MIN_MOTION_SAMPLES`
        detections of ``window`` fit (few: it vetoes the gripper's motion
        only when the object itself stays put, and must not lag a real
        drag); None with fewer than two or one stamp."""
        seen = self._seen
        lo, hi = max(window[0], window[1] - MIN_MOTION_SAMPLES), window[1]
        if hi - lo < 2 or seen.stamps[hi - 1] <= seen.stamps[lo]:
            return None
        v, _, _ = slope(np.array(seen.stamps[lo:hi]), seen.p_w[lo:hi, :2])
        return math.hypot(v[0], v[1])

    def _spread(self, points: np.ndarray) -> float:
        """Standard error (m) of the mean of ``points[n, 3]``: from their own
        scatter when there are enough of them, else from the configured noise."""
        n = len(points)
        if n >= MIN_SCATTER_SAMPLES:
            sigma = float(np.sqrt(np.var(points, axis=0, ddof=1).mean()))
        else:
            sigma = self.config.position_noise_m
        return sigma / math.sqrt(n)

    def _from_detections(self, now_s: float, window: tuple[int, int]) -> Estimate:
        cfg, seen = self.config, self._seen
        lo, hi = window
        if hi == lo or now_s - seen.stamps[hi - 1] > cfg.staleness_s:
            return Estimate()
        if hi - lo < MIN_MOTION_SAMPLES:
            # Detections missed: reach back (within the regime) for enough to fit a slope to.
            lo = max(seen.since(max(now_s - cfg.window_s - cfg.staleness_s, self.regime_start_s)),
                     hi - MIN_MOTION_SAMPLES)
        newest = hi - 1
        est = Estimate(True, seen.p_w[newest].copy(), seen.R_w[newest].copy(), position_se_m=cfg.position_noise_m)
        if hi - lo >= 2 and seen.stamps[newest] > seen.stamps[lo]:
            n = hi - lo
            t = np.array(seen.stamps[lo:hi])
            p_w = seen.p_w[lo:hi]
            v, root_sxx, resid = slope(t, p_w)
            sigma = max(cfg.position_noise_m, resid if n >= MIN_SCATTER_SAMPLES else 0.0)
            se = sigma / root_sxx
            rot = log_rotations(np.einsum('ji,njk->nik', est.R_w, seen.R_w[lo:hi]))
            w, _, resid_r = slope(t, rot)
            sigma_r = max(cfg.orientation_noise_rad, resid_r if n >= MIN_SCATTER_SAMPLES else 0.0)
            est.samples = n
            est.speed_m_s = _length(v)
            est.horizontal_m_s = math.hypot(v[0], v[1])
            est.angular_rad_s = _length(w)
            est.speed_floor_m_s, est.horizontal_floor_m_s = NOISE_QUANTILE[3] * se, NOISE_QUANTILE[2] * se
            est.angular_floor_rad_s = NOISE_QUANTILE[3] * sigma_r / root_sxx
            if self.stable:
                # Still: the mean of the window is the better position.
                est.p_w = _mean_rows(p_w)
                est.R_w = est.R_w @ exp_rotation(_mean_rows(rot))     # rot: each from the newest
                est.position_se_m = sigma / math.sqrt(n)
        return est

    def decide_motion(self, est: Estimate, linear_m_s: float, angular_rad_s: float,
                      sliding_m_s: float) -> tuple[bool | None, bool | None]:
        """(stable, sliding) with hysteresis: a state is left only on
        evidence beyond the noise floor and re-entered within half of it
        (with exact poses both are the threshold itself); with no state yet (or after a grasp began or ended) the
        object is stable and not sliding unless shown otherwise.  Unknown
        motion reads unknown and keeps the state for when evidence returns;
        a fit to fewer than :data:`MIN_SCATTER_SAMPLES` detections keeps a
        state decided on at least that many (not one taken on fewer: the
        first fits of a track, two or three detections with a wide noise
        floor, must not hold "stable" for an object already moving)."""
        if not est.known or est.speed_m_s is None or est.angular_rad_s is None or est.horizontal_m_s is None:
            return None, None
        if 0 < est.samples < MIN_SCATTER_SAMPLES and self.config.position_noise_m > 0 and \
                self.stable is not None and self.sliding is not None and self._decided_on >= MIN_SCATTER_SAMPLES:
            return self.stable, self.sliding      # too few detections to change a state on
        self._decided_on = est.samples
        # Schmitt triggers: a state is left beyond the noise floor, re-entered within half of it.
        fast = est.speed_m_s > linear_m_s + est.speed_floor_m_s or \
            est.angular_rad_s > angular_rad_s + est.angular_floor_rad_s
        slow = est.speed_m_s < linear_m_s + est.speed_floor_m_s / 2 and \
            est.angular_rad_s < angular_rad_s + est.angular_floor_rad_s / 2
        self.stable = slow if self.stable is False else not fast
        # A grasped object pressed on a support can stay put while the hand moves (the fingers slip):
        # it slides only if its own detections move too.
        horizontal = est.horizontal_m_s if est.detected_horizontal_m_s is None else \
            min(est.horizontal_m_s, est.detected_horizontal_m_s)
        moving = horizontal > sliding_m_s + est.horizontal_floor_m_s
        still = horizontal < sliding_m_s + est.horizontal_floor_m_s / 2
        self.sliding = (not still) if self.sliding else moving
        return self.stable, self.sliding

    def slipped(self, window_now_s: float, slip_m: float, slip_rad: float) -> bool | None:
        """While grasped: has the object slipped from its reference (None:
        not grasped; False when not seen since the reference)?"""
        if not self.grasping:
            return None
        ref = self.reference
        if ref is None:
            return False
        cfg, seen = self.config, self._seen
        used = {m.stamp_s for m in self._reference_parts}
        want = self._averaged(RECENT_MEASUREMENTS)
        recent: list[int] = []
        for i in reversed(seen.relative(seen.since(max(window_now_s - cfg.window_s, self.onset_s)))):
            if seen.stamps[i] not in used:
                recent.append(i)
                if len(recent) == want:
                    break
        if not recent:
            return False
        p, R = self._mean_pose(recent[::-1], 'recent', relative=True)
        spread = math.sqrt(1.0 / ref[2] + 1.0 / len(recent))
        dist = _length(p - ref[0])
        angle = _length(log_rotation(ref[1].T @ R))
        return dist > slip_m + NOISE_QUANTILE[3] * cfg.position_noise_m * spread or \
            angle > slip_rad + NOISE_QUANTILE[3] * cfg.orientation_noise_rad * spread
