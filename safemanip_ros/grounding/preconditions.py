"""SafeManip's pick and place preconditions from object poses and shapes,
one frame at a time (three-valued: None is *unknown*).

* **pick** (``preconditions_satisfied_pick``): the object the gripper is
  closest to (of those not held) is stable, and the region around it is
  clear: no other object's shape comes within ``clear_m`` of it
  horizontally at an overlapping height.
* **place** (``preconditions_satisfied_place_<o>``): there is a support
  beneath the object (its centre over the support's top face, its bottom not
  below that face by more than ``gap_tolerance_m``: geometry valid), that
  support is stable, and at most ``max_foreign`` other objects lie within the
  object's footprint plus ``clear_m`` at an overlapping height (support
  region clear).

SafeManip's place preconditions also check that the support's type suits the
object and that fragile objects are not placed among clutter; those need an
ontology of fragility and support types per scene and are not grounded here
(docs/grounding.md lists the differences).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import poses
from .geometry import Shape, SupportSurface, support_gap_m

_UP = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True)
class Body:
    """An object at one frame: its pose in the world (None: unknown), shape,
    whether it is stable and whether it is held (None: unknown)."""

    p_w: np.ndarray | None
    R_w: np.ndarray
    shape: Shape
    stable: bool | None = None
    held: bool | None = None


@dataclass(frozen=True)
class Support:
    """A support at one frame: its pose in the world (None: unknown), top
    face, and whether it is stable (None: unknown)."""

    R_w: np.ndarray | None
    t_w: np.ndarray | None
    surface: SupportSurface
    stable: bool | None


def _near(a: Body, b: Body, margin_m: float) -> bool:
    """``b``'s shape within ``margin_m`` of ``a``'s horizontally, at heights that overlap."""
    assert a.p_w is not None and b.p_w is not None
    d = b.p_w - a.p_w
    h = float(np.hypot(d[0], d[1]))
    height_a = a.shape.extent_along(_UP, a.R_w)
    height_b = b.shape.extent_along(_UP, b.R_w)
    if abs(float(d[2])) > height_a + height_b + margin_m:
        return False            # one above the other: not in the region around it
    if h == 0.0:
        return True
    u = np.array([d[0] / h, d[1] / h, 0.0])
    gap = h - a.shape.extent_along(u, a.R_w) - b.shape.extent_along(-u, b.R_w)
    return gap <= margin_m


def count_near(target: str, bodies: Mapping[str, Body], margin_m: float,
                exclude: Sequence[str] = ()) -> tuple[int, int]:
    """(objects known to be near ``target``, objects whose pose is unknown)."""
    me = bodies[target]
    near = unknown = 0
    for name, b in bodies.items():
        if name == target or name in exclude:
            continue
        if b.p_w is None:
            unknown += 1
        elif _near(me, b, margin_m):
            near += 1
    return near, unknown


def _and(*values: bool | None) -> bool | None:
    """Kleene conjunction."""
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _at_most(known: int, unknown: int, limit: int) -> bool | None:
    if known > limit:
        return False
    return True if known + unknown <= limit else None


def pick_preconditions(gripper_p_w: np.ndarray | None, bodies: Mapping[str, Body], clear_m: float,
                       target: str | None = None) -> bool | None:
    """Pick preconditions of ``target`` (the object a pick skill names) or,
    without one, of the object nearest the gripper (of those not held)."""
    if target is not None:
        if bodies[target].p_w is None:
            return _and(bodies[target].stable, None)     # where it is, and so what is around it, unknown
        near, unknown = count_near(target, bodies, clear_m)
        return _and(bodies[target].stable, _at_most(near, unknown, 0))
    if gripper_p_w is None:
        return None
    free = {n: b for n, b in bodies.items() if b.held is not True}
    if not free or any(b.p_w is None for b in free.values()):
        return None             # which object is approached is not known
    target = min(free, key=lambda n: float(np.linalg.norm(free[n].p_w - gripper_p_w)))
    near, unknown = count_near(target, bodies, clear_m)
    return _and(bodies[target].stable, _at_most(near, unknown, 0))


def support_beneath(body: Body, supports: Mapping[str, Support], gap_tolerance_m: float,
                    exclude: str = '') -> tuple[str | None, bool]:
    """The support the object is over (the nearest top face below it, its
    bottom at most ``gap_tolerance_m`` into it), and whether that answer is
    certain (False: some support's pose is unknown and none was found)."""
    assert body.p_w is not None
    best: tuple[float, str] | None = None
    unknown = False
    for name, s in supports.items():
        if name == exclude:
            continue
        if s.R_w is None or s.t_w is None:
            unknown = True
            continue
        Ri, ti = poses.invert(s.R_w[None], s.t_w[None])
        R, t = poses.compose(Ri, ti, body.R_w[None], body.p_w[None])
        gap = support_gap_m(poses.to_matrix(R[0], t[0]), body.shape, s.surface)
        if gap is not None and gap >= -gap_tolerance_m and (best is None or gap < best[0]):
            best = (gap, name)
    return (best[1] if best else None), (best is not None or not unknown)


def place_preconditions(obj: str, bodies: Mapping[str, Body], supports: Mapping[str, Support], clear_m: float,
                        max_foreign: int, gap_tolerance_m: float) -> bool | None:
    """Place preconditions of ``obj`` at this frame."""
    body = bodies[obj]
    if body.p_w is None:
        return None
    support, certain = support_beneath(body, supports, gap_tolerance_m, exclude=obj)
    if support is None:
        return False if certain else None       # geometry invalid: nothing beneath it
    near, unknown = count_near(obj, bodies, clear_m, exclude=(support,))
    return _and(supports[support].stable, _at_most(near, unknown, max_foreign))


__all__ = ['Body', 'Support', 'count_near', 'pick_preconditions', 'place_preconditions', 'support_beneath']
