"""SafeManip's pick and place preconditions from poses and shapes
(grounding/preconditions.py), three-valued, on hand-placed scenes."""

from __future__ import annotations

import numpy as np
import pytest

from safemanip_ros.grounding.geometry import Shape, SupportSurface
from safemanip_ros.grounding.preconditions import Body, Support, pick_preconditions, place_preconditions

CUBE = Shape('box', (0.02, 0.02, 0.02))
TABLE = SupportSurface('table', 0.4, 0.4, 0.0)
I3 = np.eye(3)


def cube(x: float, y: float, z: float = 0.02, stable: bool | None = True, held: bool | None = False) -> Body:
    return Body(np.array([x, y, z]), I3, CUBE, stable, held)


def table(stable: bool | None = True, known: bool = True) -> dict[str, Support]:
    return {'table': Support(I3 if known else None, np.zeros(3) if known else None, TABLE, stable)}


def test_pick_needs_a_stable_object_with_clear_surroundings():
    g = np.array([0.0, 0.0, 0.10])
    assert pick_preconditions(g, {'a': cube(0, 0), 'b': cube(0.2, 0)}, 0.01) is True
    # The object still moves: not stable.
    assert pick_preconditions(g, {'a': cube(0, 0, stable=False), 'b': cube(0.2, 0)}, 0.01) is False
    # Another object 5 mm beside it (faces 0.045 - 0.04 apart): the region is not clear.
    assert pick_preconditions(g, {'a': cube(0, 0), 'b': cube(0.045, 0)}, 0.01) is False
    # The same object 5 mm beside but 10 cm higher (on a shelf above): not in the region.
    assert pick_preconditions(g, {'a': cube(0, 0), 'b': cube(0.045, 0, z=0.12)}, 0.01) is True
    # The nearest object to the gripper is the one judged; a held object is never the target.
    assert pick_preconditions(g, {'a': cube(0.3, 0, stable=False), 'b': cube(0, 0)}, 0.01) is True
    assert pick_preconditions(g, {'a': cube(0, 0, stable=False, held=True), 'b': cube(0.3, 0)}, 0.01) is True


def test_a_pick_skill_names_the_object_judged():
    """With a skill's target, the target is judged wherever the gripper is
    (far away at the skill's start), and an unknown pose elsewhere does not
    make it unknown."""
    far = np.array([1.0, 1.0, 0.5])
    scene = {'a': cube(0, 0), 'b': cube(0.045, 0), 'c': cube(0.9, 0.9)}
    assert pick_preconditions(far, scene, 0.01) is True                 # nearest: c, clear
    assert pick_preconditions(far, scene, 0.01, target='a') is False    # a: b 5 mm beside it
    assert pick_preconditions(far, {**scene, 'c': Body(None, I3, CUBE, None, False)}, 0.01, target='a') is False
    assert pick_preconditions(None, {'a': cube(0, 0)}, 0.01, target='a') is True
    lost = Body(None, I3, CUBE, None, False)
    assert pick_preconditions(far, {'a': lost, 'b': cube(0.045, 0)}, 0.01, target='a') is None
    assert pick_preconditions(far, {'a': Body(None, I3, CUBE, False, False)}, 0.01, target='a') is False


def test_pick_is_unknown_without_the_poses_it_needs():
    g = np.array([0.0, 0.0, 0.10])
    lost = Body(None, I3, CUBE, None, False)
    assert pick_preconditions(None, {'a': cube(0, 0)}, 0.01) is None
    assert pick_preconditions(g, {'a': cube(0, 0), 'b': lost}, 0.01) is None
    assert pick_preconditions(g, {'a': cube(0, 0, stable=None)}, 0.01) is None
    # Known false wins over unknown (Kleene): a moving target with an unknown neighbour... is still unknown
    # which object is approached, so unknown.
    assert pick_preconditions(g, {'a': cube(0, 0, stable=False), 'b': lost}, 0.01) is None


def test_place_needs_a_stable_support_beneath_and_a_clear_region():
    on = cube(0, 0, z=0.021)
    assert place_preconditions('a', {'a': on}, table(), 0.03, 1, 0.01) is True
    # Nothing beneath (beyond the table's edge): geometry invalid.
    assert place_preconditions('a', {'a': cube(0.5, 0, z=0.021)}, table(), 0.03, 1, 0.01) is False
    # Sunk into the table beyond the tolerance: not over its top.
    assert place_preconditions('a', {'a': cube(0, 0, z=0.0)}, table(), 0.03, 1, 0.01) is False
    # The support moves, or its motion is not known yet.
    assert place_preconditions('a', {'a': on}, table(stable=False), 0.03, 1, 0.01) is False
    assert place_preconditions('a', {'a': on}, table(stable=None), 0.03, 1, 0.01) is None
    # One foreign object within footprint + 3 cm is allowed, two are not.
    one = {'a': on, 'b': cube(0.06, 0)}
    two = {'a': on, 'b': cube(0.06, 0), 'c': cube(-0.06, 0)}
    assert place_preconditions('a', one, table(), 0.03, 1, 0.01) is True
    assert place_preconditions('a', two, table(), 0.03, 1, 0.01) is False
    # Far away they do not count.
    assert place_preconditions('a', {'a': on, 'b': cube(0.2, 0), 'c': cube(-0.2, 0)}, table(), 0.03, 1,
                               0.01) is True


def test_place_onto_an_object_support_excludes_that_support_and_reads_its_motion():
    bottom = SupportSurface('cube_b', 0.025, 0.025, 0.025)
    supports = {'table': table()['table'],
                'cube_b': Support(I3, np.array([0.0, 0.0, 0.025]), bottom, True)}
    a = cube(0, 0, z=0.05 + 0.021)
    assert place_preconditions('a', {'a': a}, supports, 0.03, 0, 0.01) is True      # cube_b itself is no clutter
    supports['cube_b'] = Support(I3, np.array([0.0, 0.0, 0.025]), bottom, False)
    assert place_preconditions('a', {'a': a}, supports, 0.03, 0, 0.01) is False


@pytest.mark.parametrize('known', [True, False])
def test_place_with_an_unknown_support_pose(known):
    result = place_preconditions('a', {'a': cube(0, 0, z=0.021)}, table(known=known), 0.03, 1, 0.01)
    assert result is (True if known else None)
    assert place_preconditions('a', {'a': Body(None, I3, CUBE)}, table(), 0.03, 1, 0.01) is None
