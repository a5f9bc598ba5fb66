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
    c = np.clip((np.trace(R, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(c)
    w = np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)
    s = np.sin(angle)
    scale = np.where(angle < 1e-9, 0.5, angle / (2.0 * np.where(s < 1e-6, 1.0, s)))
    out = w * scale[:, None]
    near_half_turn = (s < 1e-6) & (angle >= 1e-9)
    for i in np.flatnonzero(near_half_turn):
        out[i] = log_rotation(R[i])
    return out


def exp_rotation(v: np.ndarray) -> np.ndarray:
    """The rotation matrix of a rotation vector (axis × angle, rad): Rodrigues' formula."""
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = v / angle
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    out: np.ndarray = np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)
    return out


def mean_rotation(Rs: list[np.ndarray] | np.ndarray) -> np.ndarray:
    """The mean of nearby rotations: the last one turned by the mean of the
    others' rotation vectors from it (one step of the Karcher mean; exact
    for rotations about one axis, and for a detector's few degrees of noise
    indistinguishable from the full iteration)."""
    R = np.asarray(Rs)
    ref = R[-1]
    out: np.ndarray = ref @ exp_rotation(log_rotations(np.einsum('ji,njk->nik', ref, R)).mean(axis=0))
    return out


def slope(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Least-squares slope of ``x[n, d]`` against ``t[n]`` (n ≥ 2, stamps not
    all equal): (slope [d], √Sxx, residual standard deviation per axis, NaN
    with fewer than three samples)."""
    tc = t - t.mean()
    sxx = float(tc @ tc)
    xc = x - x.mean(axis=0)
    b = (tc @ xc) / sxx
    n = len(t)
    if n < 3:
        return b, math.sqrt(sxx), math.nan
    resid = xc - np.outer(tc, b)
    return b, math.sqrt(sxx), math.sqrt(float((resid * resid).sum()) / ((n - 2) * x.shape[1]))


class ObjectTrack:
    """One object's detections and grasp state, frame by frame (see the module docstring)."""

    def __init__(self, config: TrackConfig) -> None:
        self.config = config
        self.measurements: list[Measurement] = []
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
        self.measurements.append(m)
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
            self.reference = (np.mean([p.p_g for p in parts], axis=0), mean_rotation([p.R_g for p in parts]),
                              len(parts))

    def _mean_pose(self, ms: list[Measurement], slot: str, relative: bool) -> tuple[np.ndarray, np.ndarray]:
        """The mean position and rotation of ``ms`` (in the gripper when
        ``relative``, else in the world), remembered per ``slot`` while the
        same detections are asked for (frames between detections)."""
        key = (ms[0].stamp_s, ms[-1].stamp_s, len(ms), relative)     # a track's stamps only grow
        hit = self._means.get(slot)
        if hit is not None and hit[0] == key:
            return hit[1]
        if len(ms) == 1:
            value = (ms[0].p_g, ms[0].R_g) if relative else (ms[0].p_w, ms[0].R_w)
        elif relative:
            value = (np.mean([m.p_g for m in ms], axis=0), mean_rotation([m.R_g for m in ms]))
        else:
            value = (np.mean([m.p_w for m in ms], axis=0), mean_rotation([m.R_w for m in ms]))
        self._means[slot] = (key, value)
        return value

    def _averaged(self, count: int) -> int:
        """How many detections to average where ``count`` would be: one for exact poses."""
        return count if self.config.position_noise_m > 0 or self.config.orientation_noise_rad > 0 else 1

    def _window(self, now_s: float) -> list[Measurement]:
        lo = max(now_s - self.config.window_s, self.regime_start_s)
        keep_from = now_s - max(self.config.window_s, self.config.staleness_s, OFFSET_HORIZON_S)
        if self.measurements and self.measurements[0].stamp_s < keep_from:
            self.measurements = [m for m in self.measurements if m.stamp_s >= keep_from]
        return [m for m in self.measurements if m.stamp_s >= lo]

    def estimate(self, now_s: float, gripper: tuple[np.ndarray, np.ndarray] | None,
                 gripper_motion: tuple[float, float, float] | None) -> Estimate:
        """The object's state at ``now_s`` given the gripper's pose in the
        world now (None: unknown) and its motion (speed, horizontal speed,
        angular speed; None: unknown)."""
        cfg = self.config
        window = self._window(now_s)
        if self.grasping and self.ungrasped_frames == 0 and gripper is not None:
            lo = max(self.onset_s, now_s - OFFSET_HORIZON_S)
            offsets = [m for m in self.measurements if m.stamp_s >= lo and m.rel_ok] or self._reference_parts
            if not offsets:
                # Not seen since the fingers closed: where it was last seen relative to the gripper.
                offsets = [m for m in self.measurements if m.rel_ok and m.stamp_s >= now_s - OFFSET_HORIZON_S][
                    -RECENT_MEASUREMENTS:]
            if offsets:
                offsets = offsets[-self._averaged(len(offsets)):]
                off_p, off_R = self._mean_pose(offsets, 'offset', relative=True)
                GR, Gp = gripper
                est = Estimate(True, GR @ off_p + Gp, GR @ off_R,
                               position_se_m=self._spread([m.p_g for m in offsets]), from_gripper=True)
                if gripper_motion is not None:
                    est.speed_m_s, est.horizontal_m_s, est.angular_rad_s = gripper_motion
                est.detected_horizontal_m_s = self._detected_horizontal(window)
                self.last_fused = (est.p_w, est.R_w, now_s, est.position_se_m)
                return est
        if self.held_pose is not None:
            after = [m for m in window if m.stamp_s > self.held_pose[2]]
            if not after:
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

    def _detected_horizontal(self, window: list[Measurement]) -> float | None:
        """The horizontal speed the newest :data:`MIN_MOTION_SAMPLES`
        detections of ``window`` fit (few: it vetoes the gripper's motion
        only when the object itself stays put, and must not lag a real
        drag); None with fewer than two or one stamp."""
        window = window[-MIN_MOTION_SAMPLES:]
        if len(window) < 2 or window[-1].stamp_s <= window[0].stamp_s:
            return None
        v, _, _ = slope(np.array([m.stamp_s for m in window]), np.array([m.p_w[:2] for m in window]))
        return float(math.hypot(v[0], v[1]))

    def _spread(self, points: list[np.ndarray]) -> float:
        """Standard error (m) of the mean of ``points``: from their own
        scatter when there are enough of them, else from the configured noise."""
        n = len(points)
        if n >= MIN_SCATTER_SAMPLES:
            sigma = float(np.sqrt(np.var(np.array(points), axis=0, ddof=1).mean()))
        else:
            sigma = self.config.position_noise_m
        return sigma / math.sqrt(n)

    def _from_detections(self, now_s: float, window: list[Measurement]) -> Estimate:
        cfg = self.config
        if not window or now_s - window[-1].stamp_s > cfg.staleness_s:
            return Estimate()
        if len(window) < MIN_MOTION_SAMPLES:
            # Detections missed: reach back (within the regime) for enough to fit a slope to.
            lo = max(now_s - cfg.window_s - cfg.staleness_s, self.regime_start_s)
            window = [m for m in self.measurements if m.stamp_s >= lo][-MIN_MOTION_SAMPLES:]
        newest = window[-1]
        est = Estimate(True, newest.p_w, newest.R_w, position_se_m=cfg.position_noise_m)
        if len(window) >= 2 and window[-1].stamp_s > window[0].stamp_s:
            t = np.array([m.stamp_s for m in window])
            v, root_sxx, resid = slope(t, np.array([m.p_w for m in window]))
            sigma = max(cfg.position_noise_m, resid if len(window) >= MIN_SCATTER_SAMPLES else 0.0)
            se = sigma / root_sxx
            rot = log_rotations(np.einsum('ji,njk->nik', newest.R_w, np.array([m.R_w for m in window])))
            w, _, resid_r = slope(t, rot)
            sigma_r = max(cfg.orientation_noise_rad, resid_r if len(window) >= MIN_SCATTER_SAMPLES else 0.0)
            est.samples = len(window)
            est.speed_m_s = float(np.linalg.norm(v))
            est.horizontal_m_s = float(math.hypot(v[0], v[1]))
            est.angular_rad_s = float(np.linalg.norm(w))
            est.speed_floor_m_s, est.horizontal_floor_m_s = NOISE_QUANTILE[3] * se, NOISE_QUANTILE[2] * se
            est.angular_floor_rad_s = NOISE_QUANTILE[3] * sigma_r / root_sxx
            if self.stable:
                # Still: the mean of the window is the better position.
                est.p_w = np.mean([m.p_w for m in window], axis=0)
                est.R_w = newest.R_w @ exp_rotation(rot.mean(axis=0))     # rot: each from the newest
                est.position_se_m = sigma / math.sqrt(len(window))
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
        cfg = self.config
        lo = max(window_now_s - cfg.window_s, self.onset_s)
        used = {id(m) for m in self._reference_parts}
        recent = [m for m in self.measurements if m.stamp_s >= lo and m.rel_ok and id(m) not in used]
        recent = recent[-self._averaged(RECENT_MEASUREMENTS):]
        if not recent:
            return False
        p, R = self._mean_pose(recent, 'recent', relative=True)
        spread = math.sqrt(1.0 / ref[2] + 1.0 / len(recent))
        dist = float(np.linalg.norm(p - ref[0]))
        angle = float(np.linalg.norm(log_rotation(ref[1].T @ R)))
        return dist > slip_m + NOISE_QUANTILE[3] * cfg.position_noise_m * spread or \
            angle > slip_rad + NOISE_QUANTILE[3] * cfg.orientation_noise_rad * spread
