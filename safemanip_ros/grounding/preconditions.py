"""SafeManip's pick and place preconditions from object poses and shapes,
over many frames at once (:func:`pick_columns`, :func:`place_columns`;
three-valued codes: 1 true, 0 false, -1 *unknown*), and for one frame
(:func:`pick_preconditions`, :func:`place_preconditions`; None is
unknown) through the same code.

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
from .geometry import Shape, SupportSurface, extents_along, support_gaps_m

TRUE, FALSE, UNKNOWN = 1, 0, -1
"""Three-valued codes of the column form."""


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


@dataclass
class Bodies:
    """Objects over ``n`` frames: positions ``p_w[m, n, 3]`` (m; known where
    ``known[m, n]``), rotations ``R_w[m, n, 3, 3]``, shapes, and three-valued
    ``stable[m, n]`` and ``held[m, n]``."""

    names: list[str]
    p_w: np.ndarray
    known: np.ndarray
    R_w: np.ndarray
    shapes: list[Shape]
    stable: np.ndarray
    held: np.ndarray


@dataclass
class Supports:
    """Supports over ``n`` frames: poses in the world (known where
    ``known[s, n]``), top faces, and three-valued ``stable[s, n]``."""

    names: list[str]
    R_w: np.ndarray
    t_w: np.ndarray
    known: np.ndarray
    surfaces: list[SupportSurface]
    stable: np.ndarray


def _and(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kleene conjunction of three-valued codes."""
    out: np.ndarray = np.where((a == FALSE) | (b == FALSE), FALSE, np.where((a == UNKNOWN) | (b == UNKNOWN),
                                                                          UNKNOWN, TRUE)).astype(np.int8)
    return out


def _at_most(known: np.ndarray, unknown: np.ndarray, limit: int) -> np.ndarray:
    """Three-valued "at most ``limit``" of ``known`` counted and ``unknown`` more that may be."""
    out: np.ndarray = np.where(known > limit, FALSE, np.where(known + unknown <= limit, TRUE, UNKNOWN)).astype(np.int8)
    return out


def near_matrix(bodies: Bodies, margin_m: float) -> np.ndarray:
    """``out[a, b, k]``: at frame ``k``, body ``b``'s shape within
    ``margin_m`` of body ``a``'s horizontally, at heights that overlap
    (both poses known); every ordered pair at once (the diagonal False)."""
    m, n = len(bodies.names), bodies.known.shape[1]
    if m < 2:
        return np.zeros((m, m, n), bool)
    d = bodies.p_w[None, :] - bodies.p_w[:, None]          # [a, b, n, 3]: b's position less a's
    h = np.hypot(d[..., 0], d[..., 1])
    up = np.broadcast_to(np.array([0.0, 0.0, 1.0]), (n, 3))
    ext_up = np.stack([extents_along(bodies.shapes[j], up, bodies.R_w[j]) for j in range(m)])
    apart = np.abs(d[..., 2]) > ext_up[:, None] + ext_up[None, :] + margin_m
    safe_h = np.where(h == 0.0, 1.0, h)
    u = np.stack([d[..., 0] / safe_h, d[..., 1] / safe_h, np.zeros(h.shape)], axis=-1)
    # Each body's half-width towards the other (a's along u, b's along -u), a shape's rotations per frame.
    ext_a = np.stack([extents_along(bodies.shapes[a], u[a].reshape(-1, 3),
                                    np.broadcast_to(bodies.R_w[a], (m, n, 3, 3)).reshape(-1, 3, 3)).reshape(m, n)
                      for a in range(m)])
    ext_b = np.stack([extents_along(bodies.shapes[b], (-u[:, b]).reshape(-1, 3),
                                    np.broadcast_to(bodies.R_w[b], (m, n, 3, 3)).reshape(-1, 3, 3)).reshape(m, n)
                      for b in range(m)], axis=1)
    gap = h - ext_a - ext_b
    near: np.ndarray = ~apart & ((h == 0.0) | (gap <= margin_m))
    near[np.arange(m), np.arange(m)] = False
    return near


def count_near_columns(bodies: Bodies, target: int, near: np.ndarray,
                       exclude: tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: (bodies known to be near ``target``, bodies whose pose is
    unknown), from the :func:`near_matrix` ``near``."""
    n = bodies.known.shape[1]
    count, unknown = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for b in range(len(bodies.names)):
        if b == target or b in exclude:
            continue
        count += bodies.known[b] & near[target, b]
        unknown += ~bodies.known[b]
    return count, unknown


def _ready(bodies: Bodies, j: int, near_pairs: np.ndarray) -> np.ndarray:
    """Body ``j`` judged as the pick's object per frame: stable and clear
    around (unknown where its pose is, and so what is around it)."""
    near, unknown = count_near_columns(bodies, j, near_pairs)
    clear = np.where(bodies.known[j], _at_most(near, unknown, 0), UNKNOWN).astype(np.int8)
    return _and(bodies.stable[j], clear)


def pick_columns(gripper_p_w: np.ndarray, gripper_known: np.ndarray, bodies: Bodies, clear_m: float,
                 targets: np.ndarray) -> np.ndarray:
    """Pick preconditions per frame: of the body ``targets[k]`` (a pick
    skill's object) or, where it is -1, of the body nearest the gripper of
    those not held (unknown where the gripper's or one of their poses is)."""
    m, n = len(bodies.names), len(targets)
    if not m:
        return np.full(n, UNKNOWN, np.int8)
    pairs = near_matrix(bodies, clear_m)
    ready = np.stack([_ready(bodies, j, pairs) for j in range(m)])
    free = bodies.held != TRUE
    dist = np.where(free & bodies.known, np.sqrt(((bodies.p_w - gripper_p_w[None]) ** 2).sum(axis=2)), np.inf)
    nearest = np.argmin(dist, axis=0)
    decidable = gripper_known & free.any(axis=0) & ~(free & ~bodies.known).any(axis=0)
    chosen = np.where(targets >= 0, targets, nearest)
    judged = ready[chosen, np.arange(n)]
    out: np.ndarray = np.where((targets >= 0) | decidable, judged, UNKNOWN).astype(np.int8)
    return out


def place_columns(bodies: Bodies, supports: Supports, clear_m: float, max_foreign: int,
                  gap_tolerance_m: float, body_gaps: np.ndarray | None = None,
                  body_below_m: np.ndarray | None = None) -> np.ndarray:
    """Place preconditions ``[m, n]`` of each body per frame: the support
    beneath it (the nearest top face below its bottom, at most
    ``gap_tolerance_m`` into it) is stable and at most ``max_foreign`` other
    bodies are within ``clear_m`` of it; false with nothing beneath it,
    unknown where that depends on a pose not known.  ``body_gaps[m, s, n]``: each
    body's :func:`~.geometry.support_gaps_m` above each support, where the
    caller has them already; ``body_below_m[m, s, n]``: how far (m) into each
    support each body may reach instead of ``gap_tolerance_m``, where the
    caller's support test widens it (a pose's uncertainty, a grip that slips),
    so a place is judged over the support the object is said to rest on."""
    m, n = len(bodies.names), bodies.known.shape[1]
    out = np.full((m, n), UNKNOWN, np.int8)
    index = {name: j for j, name in enumerate(bodies.names)}
    pairs = near_matrix(bodies, clear_m)
    for j, obj in enumerate(bodies.names):
        gaps = np.full((len(supports.names), n), np.inf)
        some_unknown = np.zeros(n, bool)
        values = []
        for s, (name, surface) in enumerate(zip(supports.names, supports.surfaces)):
            if name == obj:
                values.append(np.full(n, UNKNOWN, np.int8))
                continue
            some_unknown |= ~supports.known[s]
            if body_gaps is not None:
                gap = body_gaps[j, s]
            else:
                Ri, ti = poses.invert(supports.R_w[s], supports.t_w[s])
                R, t = poses.compose(Ri, ti, bodies.R_w[j], bodies.p_w[j])
                gap = support_gaps_m(R, t, bodies.shapes[j], surface)
            below_m = gap_tolerance_m if body_below_m is None else body_below_m[j, s]
            with np.errstate(invalid='ignore'):
                beneath = supports.known[s] & (gap >= -below_m)
            gaps[s] = np.where(beneath, gap, np.inf)
            other = (index[name],) if name in index else ()
            near, unknown = count_near_columns(bodies, j, pairs, exclude=other)
            values.append(_and(supports.stable[s], _at_most(near, unknown, max_foreign)))
        if not values:
            out[j] = np.where(bodies.known[j], FALSE, UNKNOWN)
            continue
        best = np.argmin(gaps, axis=0)
        found = np.isfinite(gaps[best, np.arange(n)])
        chosen = np.stack(values)[best, np.arange(n)]
        out[j] = np.where(~bodies.known[j], UNKNOWN,
                          np.where(found, chosen, np.where(some_unknown, UNKNOWN, FALSE)))
    return out


def _code(v: bool | None) -> int:
    return UNKNOWN if v is None else int(v)


def _value(code: int) -> bool | None:
    return None if code == UNKNOWN else bool(code)


def _one_frame(bodies: Mapping[str, Body]) -> Bodies:
    names = list(bodies)
    return Bodies(names, np.array([[b.p_w if b.p_w is not None else np.zeros(3)] for b in bodies.values()]
                                  ).reshape(len(names), 1, 3),
                  np.array([[b.p_w is not None] for b in bodies.values()], bool).reshape(len(names), 1),
                  np.array([[b.R_w] for b in bodies.values()]).reshape(len(names), 1, 3, 3),
                  [b.shape for b in bodies.values()],
                  np.array([[_code(b.stable)] for b in bodies.values()], np.int8).reshape(len(names), 1),
                  np.array([[_code(b.held)] for b in bodies.values()], np.int8).reshape(len(names), 1))


def count_near(target: str, bodies: Mapping[str, Body], margin_m: float,
               exclude: Sequence[str] = ()) -> tuple[int, int]:
    """(objects known to be near ``target``, objects whose pose is unknown) at one frame."""
    b = _one_frame(bodies)
    near, unknown = count_near_columns(b, b.names.index(target), near_matrix(b, margin_m),
                                       tuple(b.names.index(e) for e in exclude if e in b.names))
    return int(near[0]), int(unknown[0])


def pick_preconditions(gripper_p_w: np.ndarray | None, bodies: Mapping[str, Body], clear_m: float,
                       target: str | None = None) -> bool | None:
    """Pick preconditions of ``target`` (the object a pick skill names) or,
    without one, of the object nearest the gripper (of those not held), at one frame."""
    b = _one_frame(bodies)
    g = np.zeros((1, 3)) if gripper_p_w is None else np.asarray(gripper_p_w, float)[None]
    return _value(int(pick_columns(g, np.array([gripper_p_w is not None]), b, clear_m,
                                   np.array([-1 if target is None else b.names.index(target)]))[0]))


def place_preconditions(obj: str, bodies: Mapping[str, Body], supports: Mapping[str, Support], clear_m: float,
                        max_foreign: int, gap_tolerance_m: float) -> bool | None:
    """Place preconditions of ``obj`` at one frame."""
    b = _one_frame(bodies)
    known = [s.R_w is not None and s.t_w is not None for s in supports.values()]
    sup = Supports(list(supports), np.array([[s.R_w if s.R_w is not None else np.eye(3)] for s in supports.values()]
                                            ).reshape(len(supports), 1, 3, 3),
                   np.array([[s.t_w if s.t_w is not None else np.zeros(3)] for s in supports.values()]
                            ).reshape(len(supports), 1, 3),
                   np.array(known, bool).reshape(len(supports), 1), [s.surface for s in supports.values()],
                   np.array([[_code(s.stable)] for s in supports.values()], np.int8).reshape(len(supports), 1))
    return _value(int(place_columns(b, sup, clear_m, max_foreign, gap_tolerance_m)[b.names.index(obj), 0]))


__all__ = ['Bodies', 'Body', 'FALSE', 'Support', 'Supports', 'TRUE', 'UNKNOWN', 'count_near', 'count_near_columns', 'near_matrix',
           'pick_columns', 'pick_preconditions', 'place_columns', 'place_preconditions']
