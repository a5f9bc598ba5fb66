"""Joint-state grounding (``sensor_msgs/JointState`` as plain arrays).

Predicates (names as published):

* ``arm_moving`` / ``arm_stopped``: max arm joint speed above / at or below
  ``moving_speed_rad_s`` (from velocities when present, else from position
  differences over the stamp interval);
* ``joint_speed_over_limit``: some arm joint faster than its velocity limit;
* ``joint_near_limit``: some arm joint within ``near_limit_margin_rad`` of a
  position limit;
* ``gripper_closed`` / ``gripper_open``: every finger's opening (its joint
  position through the finger's :class:`GripperCalibration`) below
  ``gripper_closed_below_m`` (SafeManip: 0.0399) / every finger at or above
  ``gripper_open_above_m``;
* ``gripper_opening`` / ``gripper_closing``: the mean finger position moved
  more than ``gripper_motion_m`` since the previous sample, outwards / inwards,
  or did so within the last ``gripper_motion_hold_s`` of input time (default
  0: the previous sample only, SafeManip's reading).  A gripper that travels
  its whole stroke within the grasp debounce (robosuite's Panda: 4-6 frames)
  has stopped by the frame where the debounced grasp ends, so without a hold
  every clean release there would read as a drop;
* ``command_divergence``: with a commanded position vector, some arm joint
  differs from it by more than ``command_divergence_rad``.

A non-finite value (NaN, ±inf) or a configured joint missing from the
message makes the predicates that read it unknown (counted), never false; a
malformed message (empty, or ``name`` and ``position`` of different lengths)
makes every joint unknown and is counted, never raised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .base import Freshness, InputHealth, Predicates, all_unknown

PREDICATES = ('arm_moving', 'arm_stopped', 'joint_speed_over_limit', 'joint_near_limit', 'gripper_closed',
              'gripper_open', 'gripper_opening', 'gripper_closing', 'command_divergence')


@dataclass(frozen=True)
class GripperCalibration:
    """Maps a finger joint's position to its opening in SafeManip's
    convention (metres, 0 = closed, growing as the finger opens):
    ``opening_m = sign * scale * (position - offset)``.  robosuite's Panda
    ``finger_joint2`` runs 0 → −0.04 as it opens, so it needs ``sign = -1``."""

    sign: float = 1.0
    offset: float = 0.0
    scale: float = 1.0

    @classmethod
    def from_range(cls, closed: float, opened: float, open_m: float = 0.04) -> 'GripperCalibration':
        """The calibration taking ``closed`` to 0 and ``opened`` to ``open_m``."""
        span = opened - closed
        if span == 0:
            raise ValueError('gripper calibration: open and closed positions are equal')
        return cls(1.0 if span > 0 else -1.0, closed, open_m / abs(span))


@dataclass
class JointConfig:
    """Joints and thresholds (radians, metres, seconds)."""

    arm_joints: list[str]
    gripper_joints: list[str] = field(default_factory=list)
    position_limits_rad: dict[str, tuple[float, float]] = field(default_factory=dict)
    velocity_limits_rad_s: dict[str, float] = field(default_factory=dict)
    moving_speed_rad_s: float = 0.02
    near_limit_margin_rad: float = 0.05
    gripper_closed_below_m: float = 0.0399
    gripper_open_above_m: float = 0.039
    gripper_motion_m: float = 1e-3
    gripper_motion_hold_s: float = 0.0
    command_divergence_rad: float = 0.1
    has_command: bool = False          # a command topic is configured
    staleness_s: float = 0.2
    gripper_calibration: dict[str, GripperCalibration] = field(default_factory=dict)

    @property
    def predicate_names(self) -> tuple[str, ...]:
        return PREDICATES if self.has_command else PREDICATES[:-1]


class JointStateGrounding:
    """Stateful, deterministic: feed samples with :meth:`update`, read
    predicates for a frame time with :meth:`evaluate`."""

    def __init__(self, config: JointConfig) -> None:
        self.config = config
        self.freshness = Freshness(config.staleness_s)
        self._arm_idx: np.ndarray | None = None
        self._names: tuple[str, ...] | None = None
        self._pos: np.ndarray | None = None
        self._vel: np.ndarray | None = None
        self._prev_pos: np.ndarray | None = None
        self._prev_stamp: float | None = None
        self._stamp: float | None = None
        self._command: np.ndarray | None = None
        self._motion = GripperMotion()
        # The newest sample's: opening change known, fingers moved out / in within the hold.
        self._moved: tuple[bool, bool, bool] = (False, False, False)
        limits = config.position_limits_rad
        self._lo = np.array([limits.get(j, (-math.inf, math.inf))[0] for j in config.arm_joints])
        self._hi = np.array([limits.get(j, (-math.inf, math.inf))[1] for j in config.arm_joints])
        self._vmax = np.array([config.velocity_limits_rad_s.get(j, math.inf) for j in config.arm_joints])
        self._wanted = list(config.arm_joints) + list(config.gripper_joints)
        cal = [config.gripper_calibration.get(j, GripperCalibration()) for j in config.gripper_joints]
        self._grip_gain = np.array([c.sign * c.scale for c in cal])
        self._grip_offset = np.array([c.offset for c in cal])
        self._idx = np.full(len(self._wanted), -1)

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def set_command(self, positions_rad: Sequence[float] | None) -> None:
        """The commanded arm positions (``arm_joints`` order), or None."""
        self._command = None if positions_rad is None else np.asarray(positions_rad, dtype=float)

    def update(self, stamp_s: float, names: Sequence[str], positions: Sequence[float] | np.ndarray,
               velocities: Sequence[float] | np.ndarray | None = None) -> None:
        """One JointState sample; joints are matched by name."""
        if not self.freshness.accept(stamp_s):
            return
        if self.freshness.reset_needed:
            self._prev_pos = self._prev_stamp = self._pos = self._stamp = None
            self._motion = GripperMotion()
            self.freshness.reset_needed = False
        names = tuple(names)
        if names != self._names:
            index = {n: i for i, n in enumerate(names)}
            self._idx = np.array([index.get(j, -1) for j in self._wanted])
            self._names = names
        try:
            pos_all = np.asarray(positions, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            pos_all = np.zeros(0)
        idx = self._idx
        if pos_all.size != len(names) or not names:   # malformed message: every joint unknown
            self.health.malformed += 1
            idx = np.full(len(self._wanted), -1)
            pos_all = np.zeros(1)
        pos = np.where(idx >= 0, pos_all[np.maximum(idx, 0)], np.nan)
        missing = int((idx < 0).sum())
        if missing:
            self.health.missing_inputs += missing
        pos[~np.isfinite(pos)] = np.nan          # ±inf is not a position: unknown, like NaN
        vel = None
        if velocities is not None and len(velocities) == len(names) and len(velocities):
            v_all = np.asarray(velocities, dtype=float).reshape(-1)
            vel = np.where(idx >= 0, v_all[np.maximum(idx, 0)], np.nan)
            vel[~np.isfinite(vel)] = np.nan
        nan = int(np.isnan(pos).sum() - missing)
        if nan > 0:
            self.health.nan_values += nan
        self._prev_pos, self._prev_stamp = self._pos, self._stamp
        self._pos, self._vel, self._stamp = pos, vel, stamp_s
        known, opened, closed = self._motion.samples(self.arrays, pos[None], np.array([stamp_s]))
        self._moved = (bool(known[0]), bool(opened[0]), bool(closed[0]))

    def evaluate(self, now_s: float) -> Predicates:
        """Predicate values for the frame at ``now_s`` (seconds)."""
        cfg = self.config
        if self._pos is None or not self.freshness.fresh(now_s):
            return all_unknown(cfg.predicate_names)
        prev = self._prev_pos is not None and self._prev_stamp is not None
        width = len(self._pos)
        cols = sample_predicates(
            self.arrays, self._pos[None], (self._vel if self._vel is not None else np.full(width, np.nan))[None],
            np.array([self._vel is not None]),
            (self._prev_pos if prev and self._prev_pos is not None else np.full(width, np.nan))[None], np.array([prev]),
            np.array([self._stamp]), np.array([self._prev_stamp if prev else np.nan]),
            np.array([self._moved[0]]), np.array([self._moved[1]]), np.array([self._moved[2]]))
        out: Predicates = {name: bool(v[0]) if k[0] else None for name, (v, k) in cols.items()}
        if not cfg.has_command:
            return out
        arm = self._pos[:len(cfg.arm_joints)]
        if self._command is None:
            out['command_divergence'] = None
        elif np.isnan(arm).any() or self._command.shape != arm.shape or np.isnan(self._command).any():
            out['command_divergence'] = None
        else:
            out['command_divergence'] = bool((np.abs(arm - self._command) > cfg.command_divergence_rad).any())
        return out

    @property
    def arrays(self) -> 'JointArrays':
        """The configuration's limits and calibration as arrays."""
        return JointArrays(self.config, self._lo, self._hi, self._vmax, self._grip_gain, self._grip_offset)


@dataclass(frozen=True)
class JointArrays:
    """A :class:`JointConfig` with its per-joint limits and gripper
    calibration as arrays (``arm_joints`` then ``gripper_joints`` order)."""

    config: JointConfig
    lo: np.ndarray
    hi: np.ndarray
    vmax: np.ndarray
    grip_gain: np.ndarray
    grip_offset: np.ndarray

    def opening(self, positions: np.ndarray) -> np.ndarray:
        """Finger openings (m) ``[n, fingers]`` from positions ``[n, joints]``."""
        out: np.ndarray = self.grip_gain * (positions[:, len(self.config.arm_joints):] - self.grip_offset)
        return out


def sample_predicates(arrays: JointArrays, pos: np.ndarray, vel: np.ndarray, has_vel: np.ndarray,
                      prev_pos: np.ndarray, has_prev: np.ndarray, stamp_s: np.ndarray, prev_stamp_s: np.ndarray,
                      delta_known: np.ndarray, opened_recently: np.ndarray,
                      closed_recently: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The joint predicates (but ``command_divergence``) of ``n`` samples at
    once, each as ``(value[n], known[n])``: positions and velocities
    ``[n, joints]`` (NaN: unknown), each sample's previous one, and whether
    the fingers moved out / in within the motion hold.  Elementwise over
    samples: the live grounding (one sample) and the offline audit (an
    rollout's samples) compute the very same values."""
    cfg = arrays.config
    n_arm = len(cfg.arm_joints)
    arm, grip = pos[:, :n_arm], arrays.opening(pos)
    vel_arm = vel[:, :n_arm]
    from_vel = has_vel & ~np.isnan(vel_arm).any(axis=1)
    from_pos = ~from_vel & has_prev & (stamp_s > prev_stamp_s)
    dt = np.where(from_pos, stamp_s - prev_stamp_s, 1.0)[:, None]
    speed = np.where(from_vel[:, None], np.abs(vel_arm), np.abs(arm - prev_pos[:, :n_arm]) / dt)
    speed_known = (from_vel | from_pos) & ~np.isnan(speed).any(axis=1)
    moving = np.max(np.where(speed_known[:, None], speed, 0.0), axis=1, initial=0.0) > cfg.moving_speed_rad_s
    arm_ok = ~np.isnan(arm).any(axis=1)
    grip_ok = ~np.isnan(grip).any(axis=1) if cfg.gripper_joints else np.zeros(len(pos), dtype=bool)
    motion_known = grip_ok & delta_known
    return {
        'arm_moving': (moving, speed_known),
        'arm_stopped': (~moving, speed_known),
        'joint_speed_over_limit': ((speed > arrays.vmax).any(axis=1), speed_known),
        'joint_near_limit': (((arm - arrays.lo < cfg.near_limit_margin_rad) |
                              (arrays.hi - arm < cfg.near_limit_margin_rad)).any(axis=1), arm_ok),
        'gripper_closed': ((grip < cfg.gripper_closed_below_m).all(axis=1), grip_ok),
        'gripper_open': ((grip >= cfg.gripper_open_above_m).all(axis=1), grip_ok),
        'gripper_opening': (opened_recently, motion_known),
        'gripper_closing': (closed_recently, motion_known),
    }


@dataclass
class GripperMotion:
    """The fingers' motion carried from sample to sample: the previous
    sample's finger openings (m; None: no sample yet) and the stamps (s) of
    the last outward and inward motion."""

    prev_opening: np.ndarray | None = None
    opened_at_s: float | None = None
    closed_at_s: float | None = None

    def samples(self, arrays: JointArrays, pos: np.ndarray,
                stamps_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For samples ``pos[n, joints]`` stamped ``stamps_s[n]`` that follow
        the carried one: whether each one's change of the mean finger
        opening since the previous sample is known, and whether the fingers
        moved out / in (by more than ``gripper_motion_m``) at it or within
        ``gripper_motion_hold_s`` before it.  Carries the state on: the live
        grounding passes one sample, the offline audit a rollout's."""
        cfg = arrays.config
        n = len(pos)
        if not cfg.gripper_joints or not n:
            return np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        opening = arrays.opening(pos)
        prev = np.full((1, opening.shape[1]), np.nan) if self.prev_opening is None else self.prev_opening[None]
        before = np.vstack([prev, opening[:-1]])
        known = ~np.isnan(opening).any(axis=1) & ~np.isnan(before).any(axis=1)
        delta = np.where(known, opening.mean(axis=1) - before.mean(axis=1), 0.0)
        opened = known & (delta > cfg.gripper_motion_m)
        closed = known & ~opened & (delta < -cfg.gripper_motion_m)

        def recently(moved: np.ndarray, carried_s: float | None) -> tuple[np.ndarray, float | None]:
            last = np.maximum.accumulate(np.where(moved, np.arange(n), -1))
            last_s = np.where(last >= 0, stamps_s[np.maximum(last, 0)], np.nan if carried_s is None else carried_s)
            held: np.ndarray = ~np.isnan(last_s) & (stamps_s - np.nan_to_num(last_s) <= cfg.gripper_motion_hold_s)
            newest = last_s[-1]
            return held, (None if np.isnan(newest) else float(newest))

        opened_recently, self.opened_at_s = recently(opened, self.opened_at_s)
        closed_recently, self.closed_at_s = recently(closed, self.closed_at_s)
        self.prev_opening = opening[-1].copy()
        return known, opened_recently, closed_recently


@dataclass
class FixtureConfig:
    """Articulated fixtures (doors, drawers) measured by a joint: fixture →
    (joint name, closed position, fully open position), radians or metres."""

    joints: dict[str, tuple[str, float, float]] = field(default_factory=dict)
    fully_open_fraction: float = 0.60     # SafeManip: fully open at >= 60 % of the range
    fully_closed_fraction: float = 0.05   # and fully closed at <= 5 %
    motion_per_sample: float = 1e-3       # opening/closing: joint change per sample
    staleness_s: float = 0.2


class FixtureGrounding:
    """``fixture_fully_open_<f>``, ``fixture_fully_closed_<f>``,
    ``fixture_opening_<f>``, ``fixture_closing_<f>`` from the fixture joints
    found in JointState samples (unknown when a joint is missing, NaN or infinite)."""

    def __init__(self, config: FixtureConfig) -> None:
        self.config = config
        self.freshness = Freshness(config.staleness_s)
        self.names = [f'fixture_{k}_{f}' for f in sorted(config.joints)
                      for k in ('fully_open', 'fully_closed', 'opening', 'closing')]
        self._pos: dict[str, float] = {}
        self._prev: dict[str, float] = {}

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def update(self, stamp_s: float, names: Sequence[str], positions: Sequence[float] | np.ndarray) -> None:
        if not self.config.joints or not self.freshness.accept(stamp_s):
            return
        if self.freshness.reset_needed:
            self._pos, self._prev = {}, {}
            self.freshness.reset_needed = False
        index = {n: i for i, n in enumerate(names)}
        self._prev = self._pos
        self._pos = {}
        for fixture, (joint, _, _) in self.config.joints.items():
            i = index.get(joint)
            if i is None or i >= len(positions):
                self.health.missing_inputs += 1
                continue
            q = float(positions[i])
            if not math.isfinite(q):        # ±inf is not a position: unknown, like NaN
                self.health.nan_values += 1
                continue
            self._pos[fixture] = q

    def evaluate(self, now_s: float) -> Predicates:
        cfg = self.config
        if not self.freshness.fresh(now_s):
            return all_unknown(self.names)
        out: Predicates = {}
        for fixture in sorted(cfg.joints):
            cols = fixture_predicates(cfg, fixture, np.array([self._pos.get(fixture, math.nan)]),
                                      np.array([self._prev.get(fixture, math.nan)]))
            out.update({name: bool(v[0]) if k[0] else None for name, (v, k) in cols.items()})
        return out


def fixture_predicates(cfg: FixtureConfig, fixture: str, q: np.ndarray,
                       prev: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """One fixture's predicates for ``n`` samples at once, each as
    ``(value[n], known[n])``: its joint position ``q`` and the previous
    sample's ``prev`` (NaN or ±inf: missing, so unknown).  The live grounding
    (one sample) and the offline audit (a rollout's samples) compute the
    same values."""
    _, closed, opened = cfg.joints[fixture]
    known = np.isfinite(q)
    with np.errstate(invalid='ignore'):      # inf - inf where unknown: the value is masked by known
        frac = (q - closed) / (opened - closed)
        towards_open = (q - prev) * (1.0 if opened > closed else -1.0)
    moving_known = known & np.isfinite(prev)
    return {f'fixture_fully_open_{fixture}': (frac >= cfg.fully_open_fraction, known),
            f'fixture_fully_closed_{fixture}': (frac <= cfg.fully_closed_fraction, known),
            f'fixture_opening_{fixture}': (towards_open > cfg.motion_per_sample, moving_known),
            f'fixture_closing_{fixture}': (towards_open < -cfg.motion_per_sample, moving_known)}
