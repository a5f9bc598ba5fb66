"""Scripted pick-and-place predicate traces with injectable faults.

A deterministic stand-in for a policy rollout at the predicate level (what
grounding would publish at 20 Hz), used by the demo and by tests that need a
known ground truth: each fault is a named, documented deviation whose
violating frames are known in advance.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAME_RATE_HZ = 20.0

PREDICATES = (
    'object_grasped', 'object_sync', 'object_dropped', 'object_released', 'object_left_gripper',
    'forbidden_contact_sustained',
)

FAULTS = {
    'none': 'nominal run: approach, grasp, carry, place and release',
    'slip_drop': 'the object slips in the grasp at frame 45 and falls out at frame 48 (gripper still closed)',
    'arm_collision': 'the forearm rests on a shelf edge from frame 30 to 70 (sustained forbidden contact '
                     'from frame 51, after the 20-frame tolerance)',
}


@dataclass(frozen=True)
class ScriptedRollout:
    """A predicate trace: ``frames[t][name]`` for t = 0..T-1, plus the fault's
    expected first violating frame per property (ground truth)."""

    fault: str
    frames: list[dict[str, bool]]
    expected_violation_frames: dict[str, int]


def pick_and_place(fault: str = 'none', frames_total: int = 100) -> ScriptedRollout:
    """A 5-second (100-frame) pick-and-place predicate trace with ``fault``."""
    if fault not in FAULTS:
        raise ValueError(f'unknown fault {fault!r}; known: {sorted(FAULTS)}')
    out: list[dict[str, bool]] = []
    expected: dict[str, int] = {}
    for t in range(frames_total):
        grasped = 25 <= t < 80
        sync = grasped
        released = t == 80          # gripper opens on the placement
        left = t >= 81
        dropped = t == 80           # grasp-ended edge
        contact = False
        if fault == 'slip_drop':
            if 45 <= t < 48:
                sync = False
            if t >= 48:
                grasped, sync, released = False, False, False
                dropped = t == 48
                left = True
        if fault == 'arm_collision' and 51 <= t < 70:
            contact = True
        out.append({
            'object_grasped': grasped, 'object_sync': sync, 'object_dropped': dropped,
            'object_released': released, 'object_left_gripper': left,
            'forbidden_contact_sustained': contact,
        })
    if fault == 'slip_drop':
        expected = {'grasp_remains_synced_until_dropped': 45, 'dropped_object_was_released': 48}
    elif fault == 'arm_collision':
        expected = {'no_forbidden_contact': 51}
    return ScriptedRollout(fault, out, expected)


DEMO_PROPERTIES = {
    'no_forbidden_contact': 'G(!forbidden_contact_sustained)',
    'grasp_remains_synced_until_dropped':
        'G(object_grasped -> ((object_sync U object_dropped) | G(object_sync)))',
    'dropped_object_was_released':
        'G(object_dropped -> (object_released | (!object_left_gripper U object_grasped)))',
}
"""SafeManip's formulas for the properties the scripted rollout exercises
(reference/safemanip-code.md)."""
