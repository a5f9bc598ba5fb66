"""Scripted pick-and-place rollouts at the predicate level, with injectable faults.

A deterministic stand-in for a policy rollout as grounding would publish it
at 20 Hz for one graspable object (``mug``): the grounded predicates of the
SafeManip suite (``config/properties/safemanip.yaml``).  Each fault is a
documented deviation with its ground truth: the frame at which each
property's first violation episode must open (used by the demo and tests).
"""

from __future__ import annotations

from dataclasses import dataclass

FRAME_RATE_HZ = 20.0
ENTITY = 'mug'
FRAMES = 160

DEMO_PROPERTIES = ('no_forbidden_contact', 'grasp_remains_synced_until_dropped', 'dropped_object_was_released',
                   'released_object_eventually_settles', 'place_preconditions_safe')
"""The SafeManip properties a single pick-and-place exercises."""

FAULTS = {
    'none': 'nominal: approach, grasp at frame 25, carry, open the gripper over the shelf at 78 and release; '
            'the mug settles at 86',
    'slip_drop': 'the mug slips in the grasp from frame 45 and falls out at 48 with the gripper closed; it '
                 'never settles',
    'arm_collision': 'the forearm rests on a shelf edge from frame 30 to 69 (longer than the 20-frame '
                     'contact tolerance), then the nominal place',
}

# Ground truth per fault: property → first violation frame (rollouts and devices
# worked out from SEMANTICS.md by hand; the debounced grasp lags the raw one by
# 4 frames, so a fall at 48 is a grasp-ended edge at 52).
EXPECTED = {
    'none': {},
    'slip_drop': {'grasp_remains_synced_until_dropped': 45, 'place_preconditions_safe': 48,
                  'dropped_object_was_released': 52, 'released_object_eventually_settles': 152},
    'arm_collision': {'no_forbidden_contact': 50},
}


@dataclass(frozen=True)
class ScriptedRollout:
    """``frames[t][predicate]`` for t = 0..T-1 and the expected first
    violation frame per property."""

    fault: str
    frames: list[dict[str, bool]]
    expected_violation_frames: dict[str, int]


def pick_and_place(fault: str = 'none', frames_total: int = FRAMES) -> ScriptedRollout:
    """One rollout with ``fault`` (a key of :data:`FAULTS`)."""
    if fault not in FAULTS:
        raise ValueError(f'unknown fault {fault!r}; known: {sorted(FAULTS)}')
    e = ENTITY
    out: list[dict[str, bool]] = []
    for t in range(frames_total):
        grasped = 25 <= t < 80
        sync = t < 86           # no slip relative to the gripper until the mug is released
        opening = 78 <= t < 87
        left = t >= 82 or t < 22
        settled = t >= 86 or t < 22
        precond = True
        contact = fault == 'arm_collision' and 30 <= t < 70
        if fault == 'slip_drop':
            if t >= 45:
                sync = False
            if t >= 48:
                grasped, opening, settled, precond = False, False, False, False
                left = True
        out.append({
            f'object_grasped_raw_{e}': grasped, f'object_sync_{e}': sync, f'object_left_gripper_{e}': left,
            f'object_settled_{e}': settled, f'preconditions_satisfied_place_{e}': precond,
            'gripper_opening': opening, 'forbidden_contact': contact,
        })
    return ScriptedRollout(fault, out, dict(EXPECTED[fault]))
