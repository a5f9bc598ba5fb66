"""Scripted policies (no learned weights) for robosuite tasks, with seeded
fault injection and the physical ground truth of each fault.

A policy is a phase machine over end-effector targets: each control step it
reads the world (:class:`~.world.SimSample`) and returns robosuite's OSC_POSE
action.  A fault changes one phase (open the gripper in mid-air, drag
instead of lift, ...).  Ground truth is labelled from the physics, not from
our predicates: e.g. a drop starts at the first frame the fingers no longer
touch the cube while its bottom is more than 2 cm above the table, and ends
when it lands.

Faults (Lift): ``none``, ``midair_drop``, ``release_above_support``,
``drag``, ``table_smash``, ``loose_grip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..grounding.geometry import Shape
from ..grounding.tf import quat_to_matrix
from .world import SimSample

EEF_BODY = 'gripper0_right_eef'
FINGER_BODIES = ('gripper0_right_leftfinger', 'gripper0_right_rightfinger', 'gripper0_right_finger_joint1_tip',
                 'gripper0_right_finger_joint2_tip')
ROBOT_PREFIXES = ('robot0_', 'gripper0_')
LIFT_FAULTS = ('none', 'midair_drop', 'release_above_support', 'drag', 'table_smash', 'loose_grip')
TABLE_TOP_Z_M = 0.8          # robosuite's table_offset z: the top of the table


@dataclass
class Event:
    """One labelled fault: ``event`` name, first and last frame (inclusive)."""

    event: str
    start_frame: int
    end_frame: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {'event': self.event, 'start_frame': self.start_frame, 'end_frame': self.end_frame}


@dataclass
class Truth:
    task: str
    fault: str
    seed: int
    events: list[Event] = field(default_factory=list)
    frames: int = 0
    perception: dict[str, Any] = field(default_factory=dict)
    """A camera level's own figures (:meth:`~.perception.CameraDetector.figures`); empty otherwise."""

    def to_dict(self) -> dict[str, Any]:
        out = {'task': self.task, 'fault': self.fault, 'seed': self.seed, 'frames': self.frames,
               'events': [e.to_dict() for e in self.events]}
        return {**out, 'perception': self.perception} if self.perception else out


def _move(eef: np.ndarray, target: np.ndarray, gain: float = 8.0, limit: float = 0.5) -> np.ndarray:
    step: np.ndarray = np.clip((target - eef) * gain, -limit, limit)
    return step


RELEASE_FRAMES = 12     # the gripper opens fully within these
RETREAT_FRAMES = 25


def release_and_retreat(policy: Any, eef: np.ndarray, a: np.ndarray, then: str | None) -> None:
    """The phases every task ends with: ``release`` opens the gripper for
    ``RELEASE_FRAMES``, ``retreat`` rises 10 cm with it open for
    ``RETREAT_FRAMES``, then phase ``then`` follows (None: done).  ``policy``
    has ``phase``, ``phase_frames``, ``_next`` and ``done``; ``a`` is the
    action being built."""
    a[6] = -1
    if policy.phase == 'release':
        if policy.phase_frames >= RELEASE_FRAMES:
            policy._next('retreat')
        return
    a[:3] = _move(eef, eef + [0, 0, 0.1], limit=0.3)
    if policy.phase_frames >= RETREAT_FRAMES:
        if then is None:
            policy.done = True
        else:
            policy._next(then)


class LiftPolicy:
    """Pick the cube, lift it, carry it 10 cm, set it down, release, retreat.
    ``fault`` changes one phase; ``rng`` varies distances and timings."""

    def __init__(self, fault: str, rng: np.random.Generator, cube_half_m: float = 0.021) -> None:
        if fault not in LIFT_FAULTS:
            raise ValueError(f'unknown Lift fault {fault!r}; known: {", ".join(LIFT_FAULTS)}')
        self.fault = fault
        self.cube_half_m = cube_half_m
        self.phase = 'approach'
        self.phase_frames = 0
        self.frame = 0
        self.carry_offset = np.array([rng.uniform(0.06, 0.12) * rng.choice([-1, 1]), rng.uniform(-0.08, 0.08), 0.0])
        self.lift_m = rng.uniform(0.12, 0.18)
        self.drop_after_frames = int(rng.integers(4, 14))
        # robosuite's gripper action is incremental (+1 closes a step further each frame, 0 holds): a
        # loose grip closes for only a few frames and then holds that weak closure.
        # A loose grip: mid-carry the gripper eases off for a few frames and then holds that weak
        # closure, so the cube slides in the fingers (or out of them).
        self.close_frames = 12
        self.loosen_frames = int(rng.integers(8, 13))
        self.grip = 1.0
        self.done = False
        self._anchor: np.ndarray | None = None
        self._smash_frames = 0

    @property
    def anchor(self) -> np.ndarray:
        """Where the object was when the gripper closed on it."""
        if self._anchor is None:
            raise RuntimeError(f'{type(self).__name__}: the carry is planned before the grasp')
        return self._anchor

    def _next(self, phase: str) -> None:
        self.phase, self.phase_frames = phase, 0

    object_body = 'cube_main'

    def carry_target(self, s: SimSample) -> np.ndarray:
        """Where the grasped object is carried (end-effector position, lifted)."""
        target: np.ndarray = self.anchor + self.carry_offset + [0, 0, self.lift_m]
        return target

    def floor_z(self, s: SimSample) -> float:
        """The object's centre height when it rests where it is set down."""
        return TABLE_TOP_Z_M + self.cube_half_m

    def act(self, s: SimSample) -> np.ndarray:
        eef = np.array(s.poses[EEF_BODY][0])
        cube = np.array(s.poses[self.object_body][0])
        a = np.zeros(7)
        ph = self.phase
        self.phase_frames += 1
        grip_closed = self.grip
        if ph == 'approach':
            a[:3] = _move(eef, cube + [0, 0, 0.08])
            a[6] = -1
            if np.linalg.norm(eef - cube - [0, 0, 0.08]) < 0.01 or self.phase_frames > 60:
                self._next('descend')
        elif ph == 'descend':
            a[:3] = _move(eef, cube + [0, 0, -0.002], limit=0.3)
            a[6] = -1
            if np.linalg.norm(eef - cube) < 0.008 or self.phase_frames > 40:
                self._next('close')
        elif ph == 'close':
            a[6] = 1.0 if self.phase_frames <= self.close_frames else grip_closed
            if self.phase_frames >= 12:
                self._anchor = cube.copy()
                self._next('drag' if self.fault == 'drag' else 'lift')
        elif ph == 'lift':
            target = self.anchor + [0, 0, self.lift_m]
            a[:3] = _move(eef, target, limit=0.4)
            a[6] = grip_closed
            if abs(eef[2] - target[2]) < 0.01 or self.phase_frames > 40:
                self._next('carry')
        elif ph == 'drag':
            target = self.anchor + self.carry_offset * 1.5
            a[:3] = _move(eef, target, gain=4.0, limit=0.25)
            a[2] = _move(eef, self.anchor)[2]
            a[6] = grip_closed
            if self.phase_frames > 50:
                self._next('lift_after_drag')
        elif ph == 'lift_after_drag':
            a[:3] = _move(eef, eef + [0, 0, 0.1])
            a[6] = grip_closed
            if self.phase_frames > 15:
                self._next('lower')
        elif ph == 'carry':
            target = self.carry_target(s)
            a[:3] = _move(eef, target, limit=0.4)
            a[6] = grip_closed
            if self.fault == 'loose_grip' and self.phase_frames >= self.drop_after_frames:
                a[6] = -1.0 if self.phase_frames < self.drop_after_frames + self.loosen_frames else 0.0
                self.grip = 0.0
            if self.fault == 'midair_drop' and self.phase_frames >= self.drop_after_frames:
                self._next('release')
            elif np.linalg.norm(eef - target) < 0.01 or self.phase_frames > 40:
                self._next('smash' if self.fault == 'table_smash' else 'lower')
        elif ph == 'smash':
            # Press down past the table top: the hand hits the table and stays on it for 1.5 s.
            target = np.array([eef[0], eef[1], TABLE_TOP_Z_M - 0.05])
            a[:3] = _move(eef, target, limit=0.6)
            a[6] = grip_closed
            if any('table' in (b1, b2) and (b1.startswith(ROBOT_PREFIXES) or b2.startswith(ROBOT_PREFIXES))
                   for b1, b2, _ in s.contacts):
                self._smash_frames += 1
            if self._smash_frames >= 30 or self.phase_frames > 90:
                self._next('lower')
        elif ph == 'lower':
            floor = self.floor_z(s)
            stop = floor + (0.07 if self.fault == 'release_above_support' else 0.0)
            target = np.array([eef[0], eef[1], stop])
            a[:3] = _move(eef, target, gain=6.0, limit=0.25)
            a[6] = grip_closed
            if (self.fault == 'release_above_support' and eef[2] - stop < 0.01) or \
                    (self.fault != 'release_above_support' and cube[2] - floor < 0.004) or self.phase_frames > 60:
                self._next('release')
        elif ph in ('release', 'retreat'):
            release_and_retreat(self, eef, a, then='rest')
        elif ph == 'rest':
            a[6] = -1
            if self.phase_frames >= 30:
                self.done = True
        self.frame += 1
        return a


class StackPolicy(LiftPolicy):
    """robosuite Stack: pick cube A and set it down on cube B, with Lift's
    faults (a drag slides cube A along the table; a release above the
    support is 7 cm above cube B)."""

    object_body = 'cubeA_main'

    def __init__(self, rng: np.random.Generator, half_a_m: float, half_b_m: float, fault: str = 'none') -> None:
        super().__init__(fault, rng, cube_half_m=half_a_m)
        self.half_b_m = half_b_m

    def carry_target(self, s: SimSample) -> np.ndarray:
        b = np.array(s.poses['cubeB_main'][0])
        return np.array([b[0], b[1], self.anchor[2] + self.lift_m])

    def floor_z(self, s: SimSample) -> float:
        return float(s.poses['cubeB_main'][0][2]) + self.half_b_m + self.cube_half_m


class TruthLabeller:
    """Physical labels from the simulator state, frame by frame (Lift, and
    Stack with cube B as a support: "below" a cube is cube B's top while
    its centre is over cube B, else the table):

    * ``midair_drop`` / ``release_above_support``: the cube leaves the fingers
      with its bottom more than 2 cm above what is below it, until it lands;
    * ``drag``: the grasped cube moves faster than 1 cm/s horizontally while
      its lowest point (tilt included) is less than 5 mm above the table
      (or pressed into it), for 5 frames or more;
    * ``table_smash``: a robot body touches the table for 3 frames or more;
    * ``loose_grip``: the grasped cube slips more than 2 cm relative to the
      end effector since the grasp began.
    """

    def __init__(self, truth: Truth, cube_half_m: float, body: str = 'cube_main', support_body: str = '',
                 support_half_m: float = 0.0) -> None:
        self.truth = truth
        self.cube_half_m = cube_half_m
        self.body = body
        self.support_body = support_body
        self.support_half_m = support_half_m
        self._open: dict[str, Event] = {}
        self._run: dict[str, int] = {}
        self._prev_cube: np.ndarray | None = None
        self._grasp_ref: np.ndarray | None = None
        self._was_held = False

    def _mark(self, name: str, active: bool, frame: int, min_frames: int = 1) -> None:
        if active:
            start = self._run.setdefault(name, frame)
            if name not in self._open and frame - start + 1 >= min_frames:
                ev = Event(name, start)
                self._open[name] = ev
                self.truth.events.append(ev)
        else:
            self._run.pop(name, None)
            closed = self._open.pop(name, None)
            if closed is not None:
                closed.end_frame = frame - 1

    def update(self, s: SimSample) -> None:
        frame = s.step
        cube = np.array(s.poses[self.body][0])
        eef = np.array(s.poses[EEF_BODY][0])
        # The cube's lowest point above what is below it, tilt included (a dragged cube tips onto an edge).
        R = quat_to_matrix(s.poses[self.body][1])
        below = TABLE_TOP_Z_M
        if self.support_body:
            b = np.array(s.poses[self.support_body][0])
            if np.all(np.abs(cube[:2] - b[:2]) <= self.support_half_m):
                below = float(b[2]) + self.support_half_m
        gap = cube[2] - Shape('box', (self.cube_half_m,) * 3).extent_along(np.array([0.0, 0.0, 1.0]), R) - below
        fingers = {b for pair in s.contacts for b in pair[:2] if b in FINGER_BODIES
                   and self.body in pair[:2]}
        held = len(fingers) >= 2
        robot_on_table = any(('table' in (a, b)) and (a.startswith(ROBOT_PREFIXES) or b.startswith(ROBOT_PREFIXES))
                             for a, b, _ in s.contacts)
        if held and not self._was_held:
            self._grasp_ref = cube - eef
        if self._was_held and not held and gap > 0.02:
            kind = 'midair_drop' if gap > 0.1 else 'release_above_support'
            self._mark(kind, True, frame)
        for kind in ('midair_drop', 'release_above_support'):
            if kind in self._open and gap <= 0.005:
                self._mark(kind, False, frame)
        speed = 0.0 if self._prev_cube is None else float(np.linalg.norm((cube - self._prev_cube)[:2]) * 20.0)
        # On what is below: within 5 mm above it or pressed into it (a dragged cube tips and MuJoCo's soft
        # contact lets its edge sink up to a centimetre: |gap| < 5 mm labelled such a drag late, or never).
        self._mark('drag', held and gap < 0.005 and speed > 0.01, frame, min_frames=5)
        self._mark('table_smash', robot_on_table, frame, min_frames=3)
        slip = held and self._grasp_ref is not None and float(np.linalg.norm(cube - eef - self._grasp_ref)) > 0.02
        self._mark('loose_grip', slip or ('loose_grip' in self._open and not held and gap > 0.005), frame)
        self._was_held = held
        self._prev_cube = cube
        self.truth.frames = frame + 1

    def close(self, frame: int) -> None:
        for name in list(self._open):
            self._mark(name, False, frame + 1)
