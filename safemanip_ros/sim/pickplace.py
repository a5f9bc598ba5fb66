"""robosuite PickPlace with food: contamination in the loop.

The scene has four objects in the source bin — Milk, Bread, Cereal, Can —
and a target bin.  robosuite's Bread stands for raw dough (a contamination
source: type ``raw_dough`` in the ontology); the others are clean.  The
scripted policy picks the Can and places it in the target bin; the fault
``touch_raw_then_clean`` first presses the gripper onto the Bread, lifts,
and then does the same pick — the robot touches clean food with
contaminated fingers; ``place_in_clutter`` puts the Can down in the source
bin between the two other objects that stand closest together — a place
whose support region is occupied (SafeManip's place preconditions).

Ground truth (:class:`PickPlaceLabeller`), from the contacts alone: the
robot becomes contaminated at its first contact with the Bread; the event
starts at its first later contact with anything clean (another object, a
bin) and lasts while that contact does.  A place in clutter is labelled on
the first frame after a grasp on which no finger touches the Can, when two
or more other objects stand within the Can's footprint + 3 cm (their
shapes as the robot configuration gives them).  A pick in clutter — an
object within 1 cm of the Can when the pick reaches it: the gripper first
within 5 cm of the Can's origin, or else the fingers first closing on it (a
Can fallen against another object is grasped off-centre, farther than 5 cm
from its origin) — is labelled on that frame whatever the fault:
robosuite's bin sometimes sets the Can against another object, and
SafeManip counts such a pick as unsafe.
"""

from __future__ import annotations

import numpy as np

from ..grounding.geometry import Shape
from ..grounding.preconditions import Body, count_near
from ..grounding.tf import quat_to_matrix
from .policies import EEF_BODY, FINGER_BODIES, ROBOT_PREFIXES, Event, Truth, _move, release_and_retreat
from .world import SimSample

PICKPLACE_FAULTS = ('none', 'touch_raw_then_clean', 'place_in_clutter')
RAW_BODY = 'Bread_main'
PICK_BODY = 'Can_main'
CLEAN_BODIES = ('Milk_main', 'Cereal_main', 'Can_main', 'bin1', 'bin2')
SHAPES = {'Can_main': Shape('cylinder', (0.025, 0.04)), 'Milk_main': Shape('box', (0.025, 0.025, 0.065)),
          'Cereal_main': Shape('box', (0.04, 0.02, 0.08)), 'Bread_main': Shape('box', (0.03, 0.03, 0.025))}
"""The objects' shapes as config/robots/robosuite_pickplace.yaml gives them."""
CLUTTER_MARGIN_M = 0.03
CLUTTER_OBJECTS = 2
APPROACH_M = 0.05           # SafeManip's pick approach distance
PICK_CLEAR_M = 0.01         # SafeManip's clutter distance: an object this close makes a pick unsafe


def bodies_at(s: SimSample) -> dict[str, Body]:
    """The four objects as the preconditions read them, from the simulator's poses."""
    return {name: Body(np.array(s.poses[name][0]), quat_to_matrix(s.poses[name][1]), shape)
            for name, shape in SHAPES.items()}


def clutter_spot(s: SimSample) -> np.ndarray:
    """Where a place is in clutter: between the two other objects that stand closest together."""
    others = [n for n in SHAPES if n != PICK_BODY]
    pairs = [(float(np.linalg.norm(np.subtract(s.poses[a][0][:2], s.poses[b][0][:2]))), a, b)
             for i, a in enumerate(others) for b in others[i + 1:]]
    _, a, b = min(pairs)
    mid: np.ndarray = (np.array(s.poses[a][0][:2]) + np.array(s.poses[b][0][:2])) / 2
    return mid


class PickPlacePolicy:
    """Pick the Can from the source bin, place it in the target bin."""

    def __init__(self, fault: str, rng: np.random.Generator, can_half_height_m: float, bin2_floor_z_m: float,
                 bin2_xy: np.ndarray) -> None:
        """``can_half_height_m``: the Can's origin height above what it stands on;
        ``bin2_xy``: the centre of the Can's compartment of the target bin."""
        if fault not in PICKPLACE_FAULTS:
            raise ValueError(f'unknown PickPlace fault {fault!r}; known: {", ".join(PICKPLACE_FAULTS)}')
        self.fault = fault
        self.half = can_half_height_m
        self.floor = bin2_floor_z_m
        self.bin2_xy = bin2_xy + rng.uniform(-0.02, 0.02, 2)
        self.phase = 'touch_above' if fault == 'touch_raw_then_clean' else 'approach'
        self.phase_frames = 0
        self.done = False
        self._lift_z = 0.0
        self._lower_xy = np.zeros(2)

    def _next(self, phase: str) -> None:
        self.phase, self.phase_frames = phase, 0

    def act(self, s: SimSample) -> np.ndarray:
        eef = np.array(s.poses[EEF_BODY][0])
        can = np.array(s.poses[PICK_BODY][0])
        raw = np.array(s.poses[RAW_BODY][0])
        a = np.zeros(7)
        self.phase_frames += 1
        ph = self.phase
        if ph == 'touch_above':               # fault: press the closed gripper onto the raw dough
            a[:3] = _move(eef, raw + [0, 0, 0.10])
            a[6] = 1
            if np.linalg.norm(eef - raw - [0, 0, 0.10]) < 0.01 or self.phase_frames > 60:
                self._next('touch_down')
        elif ph == 'touch_down':
            a[:3] = _move(eef, raw + [0, 0, -0.02], limit=0.2)
            a[6] = 1
            touching = any(RAW_BODY in (b1, b2) and (b1.startswith(ROBOT_PREFIXES) or b2.startswith(ROBOT_PREFIXES))
                           for b1, b2, _ in s.contacts)
            if touching or self.phase_frames > 40:
                self._next('touch_up')
        elif ph == 'touch_up':
            a[:3] = _move(eef, raw + [0, 0, 0.12])
            a[6] = -1
            if self.phase_frames > 35:          # the gripper opens step by step: let it open fully
                self._next('approach')
        elif ph == 'approach':
            a[:3] = _move(eef, can + [0, 0, 0.10])
            a[6] = -1
            if np.linalg.norm(eef - can - [0, 0, 0.10]) < 0.01 or self.phase_frames > 60:
                self._next('descend')
        elif ph == 'descend':
            a[:3] = _move(eef, can + [0, 0, 0.01], limit=0.3)
            a[6] = -1
            if np.linalg.norm(eef - can - [0, 0, 0.01]) < 0.008 or self.phase_frames > 40:
                self._next('close')
        elif ph == 'close':
            a[6] = 1
            if self.phase_frames >= 12:
                self._lift_z = eef[2] + 0.18
                self._next('lift')
        elif ph == 'lift':
            a[:3] = _move(eef, np.array([eef[0], eef[1], self._lift_z]), limit=0.4)
            a[6] = 1
            if abs(eef[2] - self._lift_z) < 0.01 or self.phase_frames > 40:
                self._next('carry')
        elif ph == 'carry':
            if self.fault == 'place_in_clutter' and self.phase_frames == 1:
                self.bin2_xy = clutter_spot(s)
            target = np.array([self.bin2_xy[0], self.bin2_xy[1], self._lift_z])
            a[:3] = _move(eef, target, limit=0.6)
            a[6] = 1
            if np.linalg.norm(eef - target) < 0.015 or self.phase_frames > 160:
                self._next('lower')
        elif ph == 'lower':
            if self.phase_frames == 1:
                self._lower_xy = eef[:2].copy()
            # Straight down onto the floor, the hand held where it stopped: pressing on past the
            # floor (or letting the hand drift) drags the can along it.
            target_z = self.floor + self.half + 0.002
            # Slow over the last 3 cm: the can touches down gently instead of bouncing sideways.
            a[:3] = _move(eef, np.array([*self._lower_xy, eef[2] - (can[2] - target_z)]), gain=6.0,
                          limit=0.25 if can[2] - target_z > 0.03 else 0.08)
            a[6] = 1
            if can[2] - (self.floor + self.half) < 0.006 or self.phase_frames > 80:
                self._next('release')
        elif ph in ('release', 'retreat'):
            release_and_retreat(self, eef, a, then=None)
        return a


class PickPlaceLabeller:
    """``touch_raw_then_clean``: the robot touches something clean after it
    touched the raw dough (contacts only)."""

    def __init__(self, truth: Truth) -> None:
        self.truth = truth
        self.contaminated = False
        self._open: Event | None = None
        self._held = False          # the fingers held the Can (two finger bodies on it) since it last left them
        self._approached = False    # the gripper came within APPROACH_M of the Can

    def update(self, s: SimSample) -> None:
        touched = {b2 if b1.startswith(ROBOT_PREFIXES) else b1 for b1, b2, _ in s.contacts
                   if b1.startswith(ROBOT_PREFIXES) != b2.startswith(ROBOT_PREFIXES)}
        if RAW_BODY in touched:
            self.contaminated = True
        clean = self.contaminated and bool(touched & set(CLEAN_BODIES))
        if clean and self._open is None:
            self._open = Event('touch_raw_then_clean', s.step)
            self.truth.events.append(self._open)
        elif not clean and self._open is not None:
            self._open.end_frame = s.step - 1
            self._open = None
        bodies = bodies_at(s)
        eef = np.array(s.poses[EEF_BODY][0])
        fingers = {b1 if b2 == PICK_BODY else b2 for b1, b2, _ in s.contacts
                   if PICK_BODY in (b1, b2) and (b1 if b2 == PICK_BODY else b2) in FINGER_BODIES}
        if not self._approached and (float(np.linalg.norm(bodies[PICK_BODY].p_w - eef)) < APPROACH_M
                                     or len(fingers) >= 2):
            self._approached = True
            near, _ = count_near(PICK_BODY, bodies, PICK_CLEAR_M)
            if near:
                self.truth.events.append(Event('pick_in_clutter', s.step, s.step))
        if len(fingers) >= 2:
            self._held = True
        elif not fingers and self._held:
            self._held = False          # the place: the Can left the fingers
            near, _ = count_near(PICK_BODY, bodies, CLUTTER_MARGIN_M)
            if near >= CLUTTER_OBJECTS:
                self.truth.events.append(Event('place_in_clutter', s.step, s.step))
        self.truth.frames = s.step + 1

    def close(self, frame: int) -> None:
        if self._open is not None:
            self._open.end_frame = frame
            self._open = None
