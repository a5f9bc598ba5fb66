"""An object's pose as a measurement: what its detections over a time
window say, fused with the exact gripper while the object is grasped.

Object poses on a real cell come from a detector: noisy, at a lower rate
than the frames, stamped at capture and published late, missing while the
fingers hide the object.  :class:`ObjectTrack` keeps one object's
detections (*measurements*: the object's pose in the world and relative to
the gripper, both at the detection's own stamp, so latency does not read
as motion) and answers for a run of frames at once (:meth:`ObjectTrack.run`: a live
frame is a run of one, an offline rollout a run of thousands, and the
state carried between runs makes them the same):

* **pose**: while the object is grasped (the contacts, exact, say so) and
  its grip offset has been measured, the gripper's pose now composed with
  the mean measured offset (not seen since the fingers closed: the offset
  it had where it lay when last seen, within ``OFFSET_HORIZON_S`` before
  the grasp, those detections agreeing); after the grasp ends, that pose frozen at the
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
* **slip** (sync): the median offset of the newest
  ``SLIP_MEASUREMENTS`` detections (within ``OFFSET_HORIZON_S``) against
  the median of the first ``REFERENCE_MEASUREMENTS`` after grasp onset (a
  median: one grossly wrong detection of three moves neither); slipped
  only when the difference exceeds the limit by the noise floor.  A grasped object not seen since the reference is synced: the
  fingers (contacts and closed joints) hold it.
* **orientation**: a detection's orientation is known only up to the
  shape's turns onto itself (a box half turned looks the same, a cylinder
  spun about its axis): each is taken as the equivalent nearest the
  previous detection's, so a detector's pose flip on a symmetric object
  moves and slips nothing.

Lengths in metres, angles in radians, times in seconds.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from . import poses, windows
from .geometry import Shape, nearest_equivalent, turns_onto_itself

REFERENCE_MEASUREMENTS = 3
"""Detections after grasp onset averaged into the slip reference."""
RECENT_MEASUREMENTS = 3
"""Newest detections a grasped object not seen since its grasp began is placed in the gripper by."""
SLIP_MEASUREMENTS = 5
"""Newest detections whose median is compared with the slip reference (five: two grossly wrong ones
among them still move the median by no more than the noise)."""
OFFSET_HORIZON_S = 2.0
"""A grasped object's grip offset is the mean of its detections since the
grasp began, over at most this long (the gripper is exact: only the
detector's noise is averaged)."""
MIN_MOTION_SAMPLES = 3
"""Detections a motion estimate is fitted to at least (older ones are taken when the window has fewer)."""
MIN_SCATTER_SAMPLES = 4
"""Samples from which noise is estimated from their own scatter (fewer: the configured noise)."""
MEDIAN_SPREAD = math.sqrt(math.pi / 2)
"""How much wider a median of several normal samples spreads than their mean (large samples; three: 1.16)."""
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
    used instead when larger; 0 for exact poses); ``correlation_s``: how
    long the detector's position error stays correlated (0: each
    detection's error independent; a tracker's error often drifts over a
    second or so), so an average of detections is not trusted beyond what
    they share (:func:`~.windows.correlated_spreads`)."""

    window_s: float = 0.5
    staleness_s: float = 0.5
    support_staleness_s: float = 2.0
    position_noise_m: float = 0.005
    orientation_noise_rad: float = 0.035
    correlation_s: float = 0.0


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


def _mean_offsets(p: np.ndarray, R: np.ndarray, valid: np.ndarray, noise_m: float,
                  stamps: np.ndarray | None = None, correlation_s: float = 0.0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each window's mean grip offset from the offsets ``p[F, W, 3]``,
    ``R[F, W, 3, 3]`` where ``valid`` (one offset: itself; gross outliers
    left out: :func:`~.windows.trimmed_mean`), and the mean
    position's standard error: from the offsets' own scatter when there are
    :data:`MIN_SCATTER_SAMPLES` or more, else from ``noise_m``; widened for
    errors correlated over ``correlation_s`` at ``stamps[F, W]``."""
    # A grossly wrong detection (trimmed_mean) is left out of the offset and its scatter.
    mean_p, valid = windows.trimmed_mean(p, valid, noise_m)
    n = valid.sum(axis=1)
    last = windows.last_valid(valid)
    at = np.arange(len(n))
    mean_R = windows.mean_rotations(R, valid, R[at, last])
    single = n == 1
    mean_p[single], mean_R[single] = p[at, last][single], R[at, last][single]
    d = p - mean_p[:, None, :]
    with np.errstate(invalid='ignore', divide='ignore'):
        var = windows.masked_sum(d * d, valid) / (n - 1)[:, None]
        sigma = np.where(n >= MIN_SCATTER_SAMPLES, np.sqrt(var.mean(axis=1)), noise_m)
    se = sigma / np.sqrt(n)
    if stamps is not None and correlation_s > 0:
        # Errors that drift together scatter less than they are off: the configured noise bounds the spread.
        se = np.maximum(sigma, noise_m) / np.sqrt(n) * windows.correlated_spreads(stamps, valid, correlation_s)[0]
    return mean_p, mean_R, se


def _median_spread(count: np.ndarray) -> np.ndarray:
    """:data:`MEDIAN_SPREAD` where a median of ``count`` samples is one (three or more), else 1 (a mean)."""
    out: np.ndarray = np.where(count >= 3, MEDIAN_SPREAD, 1.0)
    return out


def log_rotation(R: np.ndarray) -> np.ndarray:
    """The rotation vector (axis × angle, rad) of a rotation matrix."""
    out: np.ndarray = windows.log_rotations(np.asarray(R, dtype=float)[None])[0]
    return out


def mean_rotation(Rs: list[np.ndarray] | np.ndarray) -> np.ndarray:
    """The mean of nearby rotations: the last one turned by the mean of the
    others' rotation vectors from it (one step of the Karcher mean; exact
    for rotations about one axis, and for a detector's few degrees of noise
    indistinguishable from the full iteration)."""
    R = np.asarray(Rs, dtype=float)
    out: np.ndarray = windows.mean_rotations(R[None], np.ones((1, len(R)), bool), R[-1:])[0]
    return out


def slope(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Least-squares slope of ``x[n, d]`` against ``t[n]`` (n ≥ 2, stamps not
    all equal): (slope [d], √Sxx, residual standard deviation per axis, NaN
    with fewer than three samples)."""
    b, root_sxx, sigma = windows.masked_slope(np.asarray(t, float)[None], np.asarray(x, float)[None],
                                              np.ones((1, len(t)), bool))
    return b[0], float(root_sxx[0]), float(sigma[0])


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
        if n == len(self.rel_ok):       # grown, keeping every row: a run's plan holds indices into them
            for name in ('p_w', 'R_w', 'p_g', 'R_g', 'rel_ok'):
                old = getattr(self, name)
                new = np.zeros((2 * n,) + old.shape[1:], old.dtype)
                new[:n] = old
                setattr(self, name, new)
        self.stamps.append(m.stamp_s)
        self.p_w[n], self.R_w[n], self.p_g[n], self.R_g[n], self.rel_ok[n] = m.p_w, m.R_w, m.p_g, m.R_g, m.rel_ok

    def compact(self) -> None:
        """Forget the detections before ``first`` (between runs: indices change)."""
        if self.first < 64 or self.first < len(self.stamps) // 2:
            return
        keep = slice(self.first, len(self.stamps))
        self.stamps = self.stamps[self.first:]
        self.first = 0
        for name in ('p_w', 'R_w', 'p_g', 'R_g', 'rel_ok'):
            old = getattr(self, name)
            new = np.zeros((max(64, 2 * len(self.stamps)),) + old.shape[1:], old.dtype)
            new[:len(self.stamps)] = old[keep]
            setattr(self, name, new)

    def since(self, stamp_s: float) -> int:
        """The index of the first kept detection stamped at or after ``stamp_s``."""
        return bisect.bisect_left(self.stamps, stamp_s, self.first)

    def relative(self, lo: int) -> list[int]:
        """The indices from ``lo`` on of detections with the gripper's pose known."""
        rows: list[int] = (np.flatnonzero(self.rel_ok[lo:len(self.stamps)]) + lo).tolist()
        return rows


Column = tuple[np.ndarray, np.ndarray]


@dataclass
class TrackFrames:
    """An object's state over the frames of one :meth:`ObjectTrack.run`:
    its pose (``known`` False: unknown; ``from_gripper``: the gripper's
    pose and the grip offset, or that pose held after a release, not a
    detection) with the position's standard error (m), and the (values,
    known) columns of *stable*, *sliding* and *sync*."""

    known: np.ndarray             # bool[n]
    p_w: np.ndarray               # [n, 3] m
    R_w: np.ndarray               # [n, 3, 3]
    position_se_m: np.ndarray     # [n] m
    from_gripper: np.ndarray      # bool[n]
    stable: Column
    sliding: Column
    sync: Column


@dataclass(frozen=True)
class MotionLimits:
    """What counts as moving: *stable* up to ``stable_linear_m_s`` and
    ``stable_angular_rad_s``, *sliding* above ``sliding_m_s`` horizontally,
    slipped in the grip beyond ``slip_m`` or ``slip_rad`` (each beyond the
    noise floor)."""

    stable_linear_m_s: float = 0.05
    stable_angular_rad_s: float = 0.25
    sliding_m_s: float = 0.01
    slip_m: float = 0.03
    slip_rad: float = 0.3


Fused = tuple[np.ndarray, np.ndarray, float, float]
"""A pose a grasp vouched for: (p_w, R_w, time s, standard error m)."""


@dataclass
class _Plan:
    """The first pass of a run: per frame, what each estimate is made of
    (indices into the track's detections), decided from stamps and grasp
    states alone; the arithmetic is done for all frames at once after it."""

    reset: list[bool]                        # the motion state forgotten before this frame (a release)
    motion: list[tuple[float, float, float] | None]     # the gripper's motion taken as the object's
    gripper_rows: list[int]                  # frames estimated from the gripper ...
    offset_lo: list[int]                     # ... with the offsets of detections [lo, hi) (relative ones)
    offset_hi: list[int]
    offset_given: dict[int, tuple[np.ndarray, np.ndarray, float]]   # ... or with this offset (p, R, se)
    horizontal_lo: list[int]                 # ... and the detections' own horizontal motion over [lo, hi)
    horizontal_hi: list[int]
    held: dict[int, int | Fused]             # frame → the frame (or carried pose) whose pose it holds
    detected_rows: list[int]                 # frames estimated from detections [lo, hi)
    detected_lo: list[int]
    detected_hi: list[int]
    slip: dict[int, tuple[list[int], tuple[np.ndarray, np.ndarray, int]]]   # frame → recent rows, reference
    slipped: list[bool | None]               # where not in ``slip``
    code: list[int]
    grasping: list[bool]
    has_reference: list[bool]
    fused_end: int | Fused | None = None     # the last pose a grasp vouched for, after the run
    held_end: int | Fused | None = None      # the pose held since a release, after the run


class ObjectTrack:
    """One object's detections and grasp state, frame by frame (see the module docstring)."""

    def __init__(self, config: TrackConfig, limits: MotionLimits = MotionLimits(), shape: Shape = Shape()) -> None:
        """``shape``: the object's, whose turns onto itself a detector cannot
        tell apart (:func:`~.geometry.turns_onto_itself`): each detection's
        orientation is taken as the equivalent one nearest the previous
        detection's, so a symmetric object's pose flip is no motion and no slip."""
        self.config = config
        self.limits = limits
        self.shape = shape
        self._turns = turns_onto_itself(shape)
        self._symmetric = shape.kind in ('sphere', 'cylinder') or len(self._turns) > 1
        # A box's detection within half its smallest turn of the previous one is nearest as it is
        # (its turns are a quarter or a half turn apart): the test is one trace.
        smallest = 90.0 if any(abs(float(np.trace(S)) - 1.0) < 1e-9 for S in self._turns) else 180.0
        self._as_is_trace = 1.0 + 2.0 * math.cos(math.radians(smallest / 2)) if shape.kind == 'box' else math.inf
        self._seen = _Detections()
        self.last_stamp_s = -math.inf           # the newest measurement taken in
        self.regime_start_s = -math.inf         # measurements before are of another regime
        self.grasping = False
        self.onset_s = 0.0
        self.reference: tuple[np.ndarray, np.ndarray, int] | None = None   # mean offset (p, R), how many
        self._reference_parts: list[Measurement] = []
        self.ungrasped_frames = 0
        self.held_pose: Fused | None = None     # the pose at the grasp's end
        self.onset_offset: tuple[np.ndarray, np.ndarray, float] | None = None   # (p, R, se): see _onset_offset
        self.last_fused: Fused | None = None
        self.stable: bool | None = None
        self.sliding: bool | None = None
        self._decided_on = 0        # detections in the fit that last decided (stable, sliding)
        self.gross_outliers = 0     # detections left out of a still pose (windows.trimmed_mean), each once
        self.orientation_flips = 0  # detections whose orientation was taken as an equivalent one (shape)
        self._left_out: set[float] = set()

    @property
    def _exact(self) -> bool:
        return not (self.config.position_noise_m > 0 or self.config.orientation_noise_rad > 0)

    def _averaged(self, count: int) -> int:
        """How many detections to average where ``count`` would be: one for exact poses."""
        return 1 if self._exact else count

    def run(self, times_s: list[float], codes: list[int], detections: list[list[Measurement]],
            gripper_R: np.ndarray, gripper_t: np.ndarray, gripper_ok: list[bool],
            gripper_motion: list[tuple[float, float, float] | None]) -> TrackFrames:
        """The object's state at each of the frames ``times_s`` (in order),
        given per frame its grasp code (1 grasped, 0 not, else unknown or no
        input), the detections first visible then, the gripper's pose in
        the world (``gripper_R[n, 3, 3]``, ``gripper_t[n, 3]``, known where
        ``gripper_ok``) and its motion (speed, horizontal speed, angular
        speed; None: unknown).  The state carries on to the next run."""
        plan = self._plan(times_s, codes, detections, gripper_R, gripper_t, gripper_ok, gripper_motion)
        n = len(times_s)
        seen, cfg = self._seen, self.config
        stamps = np.asarray(seen.stamps)
        known = np.zeros(n, bool)
        p_w, R_w = np.zeros((n, 3)), np.tile(np.eye(3), (n, 1, 1))
        se = np.zeros(n)
        from_gripper = np.zeros(n, bool)
        # Motion evidence per frame: speed, horizontal, angular, their floors, samples, detected horizontal.
        speed: list[tuple[float, float, float] | None] = [None] * n
        floors: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * n
        samples = [0] * n
        detected_h: list[float | None] = [None] * n
        # From the gripper: the gripper's pose composed with the mean grip offset.
        rows = plan.gripper_rows
        if rows:
            off_p, off_R, off_se = np.zeros((len(rows), 3)), np.zeros((len(rows), 3, 3)), np.zeros(len(rows))
            ranged = [i for i, k in enumerate(rows) if k not in plan.offset_given]
            if ranged:
                w = windows.Windows(np.array(plan.offset_lo)[ranged], np.array(plan.offset_hi)[ranged], seen.rel_ok)
                if self._exact:
                    w.last_only()
                off_p[ranged], off_R[ranged], off_se[ranged] = self._offsets(w)
            for i, k in enumerate(rows):
                if k in plan.offset_given:
                    off_p[i], off_R[i], off_se[i] = plan.offset_given[k]
            GR, Gt = gripper_R[rows], gripper_t[rows]
            p_w[rows] = poses.mat_vec(GR, off_p) + Gt
            R_w[rows] = poses.mat_mul(GR, off_R)
            se[rows], known[rows], from_gripper[rows] = off_se, True, True
            h = self._horizontal(stamps, np.array(plan.horizontal_lo), np.array(plan.horizontal_hi))
            for k, h_k in zip(rows, h):
                detected_h[k] = h_k
                speed[k] = plan.motion[k]
        # From detections: the newest, or (while still) the window's mean; motion fitted over the window.
        rows = plan.detected_rows
        use_mean: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
        if rows:
            lo, hi = np.array(plan.detected_lo), np.array(plan.detected_hi)
            newest = hi - 1
            p_w[rows], R_w[rows] = seen.p_w[newest], seen.R_w[newest]
            se[rows], known[rows] = cfg.position_noise_m, True
            fit = np.flatnonzero((hi - lo >= 2) & (stamps[newest] > stamps[lo]))
            fits = self._fits(stamps, lo[fit], hi[fit]) if len(fit) else []
            for i, (motion, fl, count, mean) in zip(fit.tolist(), fits):
                k = rows[i]
                use_mean[k] = mean
                if plan.motion[k] is None:
                    speed[k], floors[k], samples[k] = motion, fl, count
            for k in rows:
                if plan.motion[k] is not None:
                    speed[k] = plan.motion[k]      # grasped before its offset is measured: it moves with the gripper
        # Stable and sliding: hysteresis, frame by frame (the window's mean is taken while still).
        stable_v, stable_k = np.zeros(n, bool), np.zeros(n, bool)
        sliding_v, sliding_k = np.zeros(n, bool), np.zeros(n, bool)
        for k in range(n):
            if plan.reset[k]:
                self.stable = self.sliding = None
            if k in use_mean and self.stable:
                p_w[k], R_w[k], se[k] = use_mean[k]
            if k in plan.held:
                source = plan.held[k]
                if isinstance(source, int):
                    p_w[k], R_w[k], se[k] = p_w[source], R_w[source], se[source]
                else:
                    p_w[k], R_w[k], se[k] = source[0], source[1], source[3]
                known[k] = from_gripper[k] = True
            s, sl = self._decide(speed[k], floors[k], samples[k], detected_h[k])
            stable_v[k], stable_k[k] = bool(s), s is not None
            sliding_v[k], sliding_k[k] = bool(sl), sl is not None

        def resolved(source: int | Fused | None) -> Fused | None:
            if isinstance(source, int):
                return p_w[source].copy(), R_w[source].copy(), times_s[source], float(se[source])
            return source

        self.last_fused, self.held_pose = resolved(plan.fused_end), resolved(plan.held_end)
        sync_v, sync_k = self._sync(plan)
        seen.compact()
        return TrackFrames(known, p_w, R_w, se, from_gripper, (stable_v, stable_k), (sliding_v, sliding_k),
                           (sync_v, sync_k))

    def _plan(self, times_s: list[float], codes: list[int], detections: list[list[Measurement]],
              gripper_R: np.ndarray, gripper_t: np.ndarray, gripper_ok: list[bool],
              gripper_motion: list[tuple[float, float, float] | None]) -> _Plan:
        """The first pass: grasp states, detections taken in and, per frame,
        which detections each estimate is made of."""
        cfg, seen = self.config, self._seen
        n = len(times_s)
        plan = _Plan([False] * n, [None] * n, [], [], [], {}, [], [], {}, [], [], [], {},
                     [None] * n, list(codes), [False] * n, [False] * n)
        fused_at: int | Fused | None = self.last_fused
        held: int | Fused | None = self.held_pose
        fused_time = self.last_fused[2] if self.last_fused is not None else None
        held_time = self.held_pose[2] if self.held_pose is not None else None
        for k in range(n):
            now, code = times_s[k], codes[k]
            if code == 1:
                self.ungrasped_frames = 0
                if not self.grasping:
                    self.grasping, self.onset_s = True, now
                    self.reference, self._reference_parts = None, []
                    self.regime_start_s = now
                    self.onset_offset = self._onset_offset(now, gripper_R[k], gripper_t[k]) if gripper_ok[k] \
                        else None
                held = held_time = None
            elif code == 0:
                self.ungrasped_frames += 1
                if self.grasping and self.ungrasped_frames == 1 and fused_at is not None:
                    # The fingers let go (maybe for one frame): the object is where the gripper last
                    # held it until a detection captured after that says otherwise.
                    held, held_time = fused_at, fused_time
                    assert fused_time is not None
                    self.regime_start_s = fused_time
                    plan.reset[k] = True
                # The grasp (and its slip reference) survives a one-frame contact dropout.
                if self.grasping and self.ungrasped_frames >= 2:
                    self.grasping = False
                    self.reference, self._reference_parts = None, []
            for m in detections[k]:
                self._add(m)
            lo, hi = self._window(now)
            holding = self.grasping and self.ungrasped_frames == 0
            from_gripper = holding and gripper_ok[k] and self._plan_offset(plan, k, now, lo, hi)
            if from_gripper:
                plan.motion[k] = gripper_motion[k]
                fused_at, fused_time = k, now
            elif held is not None:
                assert held_time is not None
                if not (hi > lo and seen.stamps[hi - 1] > held_time):
                    if now - held_time <= cfg.staleness_s:
                        plan.held[k] = held
                    self._plan_slip(plan, k, now)
                    continue
                held = held_time = None
            if not from_gripper and hi > lo and now - seen.stamps[hi - 1] <= cfg.staleness_s:
                if hi - lo < MIN_MOTION_SAMPLES:
                    # Detections missed: reach back (within the regime) for enough to fit a slope to.
                    lo = max(seen.since(max(now - cfg.window_s - cfg.staleness_s, self.regime_start_s)),
                             hi - MIN_MOTION_SAMPLES)
                plan.detected_rows.append(k)
                plan.detected_lo.append(lo)
                plan.detected_hi.append(hi)
                if holding:
                    plan.motion[k] = gripper_motion[k]
                    fused_at, fused_time = k, now
            self._plan_slip(plan, k, now)
        plan.fused_end, plan.held_end = fused_at, held
        return plan

    def _add(self, m: Measurement) -> None:
        """Take in a detection (one not newer than the newest taken is ignored)."""
        if m.stamp_s <= self.last_stamp_s:
            return
        self.last_stamp_s = m.stamp_s
        seen = self._seen
        if self._symmetric and len(seen) and \
                float(np.einsum('ij,ij', seen.R_w[len(seen) - 1], m.R_w)) <= self._as_is_trace:
            S = nearest_equivalent(m.R_w, seen.R_w[len(seen) - 1], self.shape, self._turns)
            if not np.allclose(S, np.eye(3), atol=1e-9):
                m = Measurement(m.stamp_s, m.p_w, m.R_w @ S, m.p_g, m.R_g @ S, m.rel_ok)
                # A turn of more than a few degrees is a flip, not the spin of a cylinder's noise.
                if float(np.trace(S)) < 1.0 + 2.0 * math.cos(math.radians(30.0)):
                    self.orientation_flips += 1
        seen.append(m)
        if self.grasping and m.stamp_s >= self.onset_s and m.rel_ok and \
                len(self._reference_parts) < self._averaged(REFERENCE_MEASUREMENTS):
            self._reference_parts.append(m)
            parts = self._reference_parts
            self.reference = (np.median(np.array([q.p_g for q in parts]), axis=0),
                              mean_rotation(np.array([q.R_g for q in parts])), len(parts))

    def _window(self, now_s: float) -> tuple[int, int]:
        """The detections of the current regime within ``window_s`` of
        ``now_s``, as an index range (older ones past every horizon are dropped)."""
        cfg, seen = self.config, self._seen
        keep_from = now_s - max(cfg.window_s, cfg.staleness_s, OFFSET_HORIZON_S)
        if seen.first < len(seen) and seen.stamps[seen.first] < keep_from:
            seen.first = seen.since(keep_from)
        return seen.since(max(now_s - cfg.window_s, self.regime_start_s)), len(seen)

    def _plan_offset(self, plan: _Plan, k: int, now_s: float, lo: int, hi: int) -> bool:
        """Plan frame ``k``'s grip offset: the detections relative to the
        gripper since the grasp began (within :data:`OFFSET_HORIZON_S`), else
        the slip reference's, else where it lay before the grasp
        (:meth:`_onset_offset`), else the last few seen before the grasp
        relative to the gripper; False when there are none."""
        seen = self._seen
        a = seen.since(max(self.onset_s, now_s - OFFSET_HORIZON_S))
        if seen.rel_ok[a:hi].any():
            plan.offset_lo.append(a)
            plan.offset_hi.append(hi)
        else:
            given = self._given_offset(now_s)
            if given is None:
                return False
            plan.offset_given[k] = given
            plan.offset_lo.append(0)
            plan.offset_hi.append(0)
        plan.gripper_rows.append(k)
        plan.horizontal_lo.append(max(lo, hi - MIN_MOTION_SAMPLES))
        plan.horizontal_hi.append(hi)
        return True

    def _given_offset(self, now_s: float) -> tuple[np.ndarray, np.ndarray, float] | None:
        """A grasped object's offset (p, R, se) where no detection since the grasp began has one (see
        :meth:`_plan_offset`)."""
        seen = self._seen
        if self._reference_parts:
            parts = self._reference_parts[-self._averaged(len(self._reference_parts)):]
            p, R = np.array([m.p_g for m in parts]), np.array([m.R_g for m in parts])
            stamps = np.array([m.stamp_s for m in parts])
        elif self.onset_offset is not None:
            return self.onset_offset
        else:
            # Not seen since the fingers closed, nor seen still before: where it was last seen relative to
            # the gripper.
            rows = seen.relative(seen.since(now_s - OFFSET_HORIZON_S))[-RECENT_MEASUREMENTS:]
            if not rows:
                return None
            rows = rows[-self._averaged(len(rows)):]
            p, R, stamps = seen.p_g[rows], seen.R_g[rows], np.asarray(seen.stamps)[rows]
        return self._mean_offset(p, R, stamps)

    def _mean_offset(self, p: np.ndarray, R: np.ndarray, stamps: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The mean of one set of offsets (``p[n, 3]``, ``R[n, 3, 3]`` stamped
        ``stamps[n]``) and its standard error (:func:`_mean_offsets`)."""
        mean_p, mean_R, se = _mean_offsets(p[None], R[None], np.ones((1, len(p)), bool),
                                           self.config.position_noise_m, stamps[None], self.config.correlation_s)
        return mean_p[0], mean_R[0], float(se[0])

    def _onset_offset(self, onset_s: float, G_R: np.ndarray, G_t: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The grip offset (p, R, se) a grasp beginning at ``onset_s`` with the
        gripper at (``G_R``, ``G_t``) has before any detection since: the
        newest detections within :data:`OFFSET_HORIZON_S` before the onset,
        where they agree (an object at rest: their spread within the noise
        floor), in the world and so in the gripper as it closed (nothing holds
        an object before its grasp, so it lay where it was last seen while the
        gripper came down over it and hid it); None where there are none or
        they disagree (a moving object: the relative offsets are used)."""
        seen = self._seen
        lo, hi = seen.since(onset_s - OFFSET_HORIZON_S), seen.since(onset_s)
        rows = list(range(lo, hi))[-self._averaged(RECENT_MEASUREMENTS):]
        if not rows:
            return None
        p_w, R_w = seen.p_w[rows], seen.R_w[rows]
        noise_m = self.config.position_noise_m
        if len(rows) > 1 and float(np.max(np.linalg.norm(p_w - np.median(p_w, axis=0), axis=1))) > \
                NOISE_QUANTILE[3] * max(noise_m, 1e-3):
            return None
        p_g = (p_w - G_t) @ G_R                     # G_R.T @ (p - t), row-wise
        R_g = np.einsum('ji,njk->nik', G_R, R_w)    # G_R.T @ R
        return self._mean_offset(p_g, R_g, np.asarray(seen.stamps)[rows])

    def _plan_slip(self, plan: _Plan, k: int, now_s: float) -> None:
        """Plan frame ``k``'s slip test: the newest detections relative to
        the gripper in the window (not the reference's own) against the reference."""
        plan.grasping[k] = self.grasping
        plan.has_reference[k] = self.reference is not None
        if not self.grasping:
            return
        ref = self.reference
        if ref is None:
            plan.slipped[k] = False
            return
        seen = self._seen
        used = {m.stamp_s for m in self._reference_parts}
        want = self._averaged(SLIP_MEASUREMENTS)
        recent: list[int] = []
        # The newest few since the grasp began (within the offset horizon, not the motion window: with
        # the fingers hiding the object a window often holds one detection, and one grossly wrong
        # detection must not read as a slip; exact poses: the newest within the window).
        horizon_s = self.config.window_s if self._exact else OFFSET_HORIZON_S
        for i in reversed(seen.relative(seen.since(max(now_s - horizon_s, self.onset_s)))):
            if seen.stamps[i] not in used:
                recent.append(i)
                if len(recent) == want:
                    break
        if not recent:
            plan.slipped[k] = False
            return
        plan.slip[k] = (recent[::-1], ref)

    def _offsets(self, w: windows.Windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each window's mean grip offset and its standard error (:func:`_mean_offsets`)."""
        seen = self._seen
        correlated = self.config.correlation_s > 0
        return _mean_offsets(seen.p_g[w.rows], seen.R_g[w.rows], w.valid, self.config.position_noise_m,
                             np.asarray(seen.stamps)[w.rows] if correlated else None, self.config.correlation_s)

    def _horizontal(self, stamps: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[float | None]:
        """The horizontal speed the detections ``[lo, hi)`` fit, per window
        (a few: it vetoes the gripper's motion only when the object itself
        stays put, and must not lag a real drag); None with fewer than two or one stamp."""
        out: list[float | None] = [None] * len(lo)
        if not len(lo):
            return out
        ok = (hi - lo >= 2) & (stamps[np.maximum(hi - 1, 0)] > stamps[np.minimum(lo, np.maximum(hi - 1, 0))])
        at = np.flatnonzero(ok)
        if len(at):
            w = windows.Windows(lo[at], hi[at])
            v, _, _ = windows.masked_slope(stamps[w.rows], self._seen.p_w[w.rows][:, :, :2], w.valid)
            for i, h in zip(at.tolist(), np.hypot(v[:, 0], v[:, 1]).tolist()):
                out[i] = h
        return out

    def _fits(self, stamps: np.ndarray, lo: np.ndarray, hi: np.ndarray
              ) -> list[tuple[tuple[float, float, float], tuple[float, float, float], int,
                              tuple[np.ndarray, np.ndarray, float]]]:
        """Per window of detections ``[lo, hi)``: the motion a least-squares
        fit gives (speed, horizontal speed, angular speed), their noise
        floors, the number of detections, and the window's mean pose with
        its standard error (taken while the object is still)."""
        cfg, seen = self.config, self._seen
        w = windows.Windows(lo, hi)
        newest_R = seen.R_w[hi - 1]
        rot = windows.relative_logs(newest_R, seen.R_w[w.rows])
        p = seen.p_w[w.rows]
        # Position and rotation fitted together (one pass over the window), their residuals apart.
        b, root_sxx, resid = windows.masked_fit(stamps[w.rows], np.concatenate([p, rot], axis=2), w.valid)
        v, wr = b[:, :3], b[:, 3:]
        n = w.count
        scatter = n >= MIN_SCATTER_SAMPLES
        sigma = np.maximum(cfg.position_noise_m,
                           np.where(scatter, windows.residual_sigma(resid[:, :, :3], w.valid), 0.0))
        pos_se = sigma / root_sxx
        if cfg.correlation_s > 0:      # errors that drift together: each window's factors (else 1, skipped)
            spread_mean, spread_slope = windows.correlated_spreads(stamps[w.rows], w.valid, cfg.correlation_s)
            pos_se = pos_se * spread_slope
        sigma_r = np.maximum(cfg.orientation_noise_rad,
                             np.where(scatter, windows.residual_sigma(resid[:, :, 3:], w.valid), 0.0))
        speed = poses.norm3(v)
        horizontal = np.hypot(v[:, 0], v[:, 1])
        angular = poses.norm3(wr)
        # The window's mean position, a gross outlier left out (trimmed_mean: a still object's pose).
        mean_p, kept = windows.trimmed_mean(p, w.valid, cfg.position_noise_m)
        left_out = w.valid & ~kept
        if left_out.any():
            self._count_left_out(stamps[w.rows[left_out]].tolist())
        mean_R = poses.mat_mul(newest_R, windows.exp_rotations(windows.masked_mean(rot, kept)))
        mean_se = sigma / np.sqrt(kept.sum(axis=1))
        if cfg.correlation_s > 0:
            mean_se = mean_se * spread_mean
        q2, q3 = NOISE_QUANTILE[2], NOISE_QUANTILE[3]
        return [((s, h, a), (q3 * ps, q2 * ps, q3 * sr / rs), c, (mp, mR, ms))
                for s, h, a, ps, sr, rs, c, mp, mR, ms in zip(
                    speed.tolist(), horizontal.tolist(), angular.tolist(), pos_se.tolist(), sigma_r.tolist(),
                    root_sxx.tolist(), n.tolist(), mean_p, mean_R, mean_se.tolist())]

    def _count_left_out(self, stamps_s: list[float]) -> None:
        """Count each detection a still pose left out as a gross outlier once
        (it stays in several windows), in :attr:`gross_outliers`."""
        seen = self._left_out
        for stamp in stamps_s:
            if stamp not in seen:
                seen.add(stamp)
                self.gross_outliers += 1
        if len(seen) > 256:        # only stamps still in some window can come again
            newest = max(seen)
            horizon_s = max(self.config.window_s, self.config.staleness_s, OFFSET_HORIZON_S)
            self._left_out = {s for s in seen if s > newest - horizon_s}

    def _decide(self, speeds: tuple[float, float, float] | None, floors: tuple[float, float, float], samples: int,
                detected_h: float | None) -> tuple[bool | None, bool | None]:
        """(stable, sliding) with hysteresis: a state is left only on
        evidence beyond the noise floor and re-entered within half of it
        (with exact poses both are the threshold itself); with no state yet (or after a grasp began or ended) the
        object is stable and not sliding unless shown otherwise.  Unknown
        motion reads unknown and keeps the state for when evidence returns;
        a fit to fewer than :data:`MIN_SCATTER_SAMPLES` detections keeps a
        state decided on at least that many (not one taken on fewer: the
        first fits of a track, two or three detections with a wide noise
        floor, must not hold "stable" for an object already moving)."""
        if speeds is None:
            return None, None
        if 0 < samples < MIN_SCATTER_SAMPLES and self.config.position_noise_m > 0 and \
                self.stable is not None and self.sliding is not None and self._decided_on >= MIN_SCATTER_SAMPLES:
            return self.stable, self.sliding      # too few detections to change a state on
        self._decided_on = samples
        speed_m_s, horizontal_m_s, angular_rad_s = speeds
        speed_floor, horizontal_floor, angular_floor = floors
        lim = self.limits
        # Schmitt triggers: a state is left beyond the noise floor, re-entered within half of it.
        fast = speed_m_s > lim.stable_linear_m_s + speed_floor or angular_rad_s > lim.stable_angular_rad_s + angular_floor
        slow = speed_m_s < lim.stable_linear_m_s + speed_floor / 2 and angular_rad_s < lim.stable_angular_rad_s + angular_floor / 2
        self.stable = slow if self.stable is False else not fast
        # A grasped object pressed on a support can stay put while the hand moves (the fingers slip):
        # it slides only if its own detections move too.
        horizontal = horizontal_m_s if detected_h is None else min(horizontal_m_s, detected_h)
        moving = horizontal > lim.sliding_m_s + horizontal_floor
        still = horizontal < lim.sliding_m_s + horizontal_floor / 2
        self.sliding = (not still) if self.sliding else moving
        return self.stable, self.sliding

    def _sync(self, plan: _Plan) -> Column:
        """*sync* per frame: not grasped, or grasped and not slipped from the
        reference (the mean offset of the newest detections against it,
        beyond the limit by the noise floor); with the grasp unknown, true
        only while an ongoing grasp shows no slip."""
        slipped = list(plan.slipped)
        if plan.slip:
            cfg, lim, seen = self.config, self.limits, self._seen
            frames = list(plan.slip)
            recent = [plan.slip[k][0] for k in frames]
            width = max(map(len, recent))
            rows = np.array([r + [r[-1]] * (width - len(r)) for r in recent], np.int64)
            valid = np.arange(width)[None, :] < np.array([len(r) for r in recent])[:, None]
            newest = np.array([r[-1] for r in recent], np.int64)
            mean_p = windows.masked_median(seen.p_g[rows], valid)
            mean_R = windows.mean_rotations(seen.R_g[rows], valid, seen.R_g[newest])
            count = valid.sum(axis=1)
            single = count == 1
            mean_p[single], mean_R[single] = seen.p_g[newest[single]], seen.R_g[newest[single]]
            ref_p = np.array([plan.slip[k][1][0] for k in frames])
            ref_R = np.array([plan.slip[k][1][1] for k in frames])
            ref_n = np.array([plan.slip[k][1][2] for k in frames], float)
            # A median of three or more spreads wider than a mean (about sqrt(pi/2) as far).
            spread = np.sqrt(_median_spread(ref_n) ** 2 / ref_n + _median_spread(count) ** 2 / count)
            dist = poses.norm3(mean_p - ref_p)
            angle = poses.norm3(windows.log_rotations(poses.mat_mul(np.swapaxes(ref_R, -1, -2), mean_R)))
            q3 = NOISE_QUANTILE[3]
            out = (dist > lim.slip_m + q3 * cfg.position_noise_m * spread) | \
                (angle > lim.slip_rad + q3 * cfg.orientation_noise_rad * spread)
            for k, v in zip(frames, out.tolist()):
                slipped[k] = v
        n = len(slipped)
        sync_v, sync_k = np.zeros(n, bool), np.zeros(n, bool)
        for k, (code, s) in enumerate(zip(plan.code, slipped)):
            if code == 1:
                sync: bool | None = not s
            elif code == -1:        # the grasp unknown
                sync = True if plan.grasping[k] and plan.has_reference[k] and not s else None
            else:
                sync = True
            sync_v[k], sync_k[k] = bool(sync), sync is not None
        return sync_v, sync_k
