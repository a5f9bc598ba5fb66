"""Contact grounding: body-pair contact lists (simulators) and wrench
thresholds (force/torque sensors on hardware).

Bodies are mapped to entities by the robot/scene configuration; each entity
has ontology roles.  A contact is *allowed* when it falls in one of
SafeManip's classes:

* robot ↔ a manipulated object (an entity of role ``movable_object``);
* robot ↔ the target fixture or one of its handles (``target_fixtures``);
* grasped object ↔ its target, receiver or the support it left from
  (``grasp_targets`` per object, plus the support at grasp onset).

Everything else that touches the robot or a grasped object is *forbidden*.

Predicates: ``forbidden_contact``; per graspable object ``o``:
``object_grasped_raw_o`` (at least ``min_finger_bodies`` finger bodies touch
it and, when the configuration has gripper joints, every finger is closed —
SafeManip's grasp test; unknown when the fingers touch and their closure is
unknown), ``object_left_gripper_o``
(no gripper body touches it); per entity ``e``: ``robot_contact_e``; per
hazard ``h`` among entity hazards: ``robot_touched_h``; and
``robot_contact_clean`` (the robot touches an entity without the
contamination hazard).  From a wrench: ``contact_force_over_threshold``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .base import Freshness, InputHealth, Predicates, all_unknown
from .poses import norm3


@dataclass
class ContactConfig:
    robot_bodies: set[str]
    finger_bodies: set[str]
    body_entity: dict[str, str]                     # simulator body/geom → entity id
    movable: set[str] = field(default_factory=set)   # entities a robot may touch
    graspable: set[str] = field(default_factory=set)
    target_fixtures: set[str] = field(default_factory=set)
    grasp_targets: dict[str, set[str]] = field(default_factory=dict)   # object → allowed contacts while grasped
    entity_hazards: dict[str, set[str]] = field(default_factory=dict)
    min_finger_bodies: int = 2
    min_force_n: float = 0.0
    staleness_s: float = 0.2
    require_fingers_closed: bool = False    # the grasp test also needs closed fingers (gripper joints configured)


@dataclass(frozen=True)
class ContactSample:
    body1: str
    body2: str
    normal_force_n: float = 0.0


@dataclass(frozen=True)
class Touches:
    """:meth:`ContactGrounding.touches` of one contact list (do not modify)."""

    fingers_on: dict[str, set[str]]      # graspable object → finger bodies touching it
    robot_touch: set[str]                # entities the robot touches
    unknown_robot_contact: bool          # the robot touches a body no entity claims
    entity_pairs: list[tuple[str, str]]  # entities touching each other


class ContactGrounding:
    def __init__(self, config: ContactConfig) -> None:
        self.config = config
        self.freshness = Freshness(config.staleness_s)
        self._contacts: list[ContactSample] | None = None
        self._grasped_prev: dict[str, bool] = {}
        self._support_at_grasp: dict[str, set[str]] = {}
        hazards = sorted({h for hs in config.entity_hazards.values() for h in hs})
        self.names = (['forbidden_contact', 'robot_contact_clean']
                      + [f'object_grasped_raw_{o}' for o in sorted(config.graspable)]
                      + [f'object_left_gripper_{o}' for o in sorted(config.graspable)]
                      + [f'robot_contact_{e}' for e in sorted(set(config.body_entity.values()))]
                      + [f'robot_touched_{h}' for h in hazards])

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def update(self, stamp_s: float, contacts: Iterable[ContactSample]) -> None:
        if not self.freshness.accept(stamp_s):
            return
        if self.freshness.reset_needed:
            self._grasped_prev, self._support_at_grasp = {}, {}
            self.freshness.reset_needed = False
        kept = []
        for c in contacts:
            try:
                force = float(c.normal_force_n)
            except (TypeError, ValueError):
                force = math.nan
            if not math.isfinite(force):
                # A contact whose force is not a number may or may not count:
                # the sample is unknown (counted), never "no contact".
                self.health.nan_values += 1
                self._contacts = None
                return
            if force >= self.config.min_force_n:
                kept.append(c)
        self._contacts = kept

    def _side(self, body: str) -> tuple[str, str | None]:
        cfg = self.config
        if body in cfg.finger_bodies:
            return 'finger', None
        if body in cfg.robot_bodies:
            return 'robot', None
        return 'entity', cfg.body_entity.get(body)

    def evaluate(self, now_s: float, fingers_closed: bool | None = None) -> Predicates:
        """Predicates at ``now_s``; ``fingers_closed`` is joint grounding's
        ``gripper_closed`` at the same time (read only when
        ``require_fingers_closed``)."""
        if self._contacts is None or not self.freshness.fresh(now_s):
            return all_unknown(self.names)
        return self.evaluate_touches(self.touches(self._contacts), fingers_closed)

    def touches(self, contacts: Iterable[ContactSample]) -> 'Touches':
        """What a contact list says, before any state: which finger bodies
        touch each graspable object, which entities the robot touches,
        whether it touches an unmapped body, and the entity pairs in
        contact.  Depends on the body names only (the offline audit computes
        it once per message layout)."""
        cfg = self.config
        fingers_on: dict[str, set[str]] = {o: set() for o in cfg.graspable}
        robot_touch: set[str] = set()
        unknown_robot_contact = False
        entity_pairs: list[tuple[str, str]] = []
        for c in contacts:
            (k1, e1), (k2, e2) = self._side(c.body1), self._side(c.body2)
            for (ka, ea, body_a), (kb, eb, _) in (((k1, e1, c.body1), (k2, e2, c.body2)),
                                                   ((k2, e2, c.body2), (k1, e1, c.body1))):
                if ka in ('robot', 'finger') and kb == 'entity':
                    if eb is None:
                        unknown_robot_contact = True   # robot touches an unmapped body: not allowed
                    else:
                        robot_touch.add(eb)
                        if ka == 'finger' and eb in fingers_on:
                            fingers_on[eb].add(body_a)
            if k1 == 'entity' and k2 == 'entity' and e1 and e2 and e1 != e2:
                entity_pairs.append((e1, e2))
        return Touches(fingers_on, robot_touch, unknown_robot_contact, entity_pairs)

    def evaluate_touches(self, touches: 'Touches', fingers_closed: bool | None = None) -> Predicates:
        """The predicates of a fresh sample's :meth:`touches` (updates the
        support remembered at each grasp's onset)."""
        cfg = self.config
        fingers_on, robot_touch = touches.fingers_on, touches.robot_touch
        unknown_robot_contact, entity_pairs = touches.unknown_robot_contact, touches.entity_pairs
        grasped: dict[str, bool | None] = {}
        for o, f in fingers_on.items():
            touching = len(f) >= cfg.min_finger_bodies
            if touching and cfg.require_fingers_closed:
                grasped[o] = fingers_closed      # Kleene AND: unknown closure leaves a touching grasp unknown
            else:
                grasped[o] = touching
        for o, g in grasped.items():   # the support an object rests on when its grasp begins
            if g and not self._grasped_prev.get(o, False):
                self._support_at_grasp[o] = {b for a, b in entity_pairs if a == o} | \
                    {a for a, b in entity_pairs if b == o}
        self._grasped_prev = {o: bool(g) for o, g in grasped.items()}
        forbidden = unknown_robot_contact or any(
            e not in cfg.movable and e not in cfg.target_fixtures for e in robot_touch)
        for a, b in entity_pairs:
            for obj, other in ((a, b), (b, a)):
                if grasped.get(obj) and other not in cfg.grasp_targets.get(obj, set()) \
                        and other not in self._support_at_grasp.get(obj, set()):
                    forbidden = True
        out: Predicates = {'forbidden_contact': forbidden}
        out['robot_contact_clean'] = any('contamination' not in cfg.entity_hazards.get(e, set())
                                         for e in robot_touch)
        for o in sorted(cfg.graspable):
            out[f'object_grasped_raw_{o}'] = grasped[o]
        for o in sorted(cfg.graspable):
            out[f'object_left_gripper_{o}'] = not fingers_on[o]
        for e in sorted(set(cfg.body_entity.values())):
            out[f'robot_contact_{e}'] = e in robot_touch
        for h in sorted({h for hs in cfg.entity_hazards.values() for h in hs}):
            out[f'robot_touched_{h}'] = any(h in cfg.entity_hazards.get(e, set()) for e in robot_touch)
        return out


@dataclass
class WrenchConfig:
    force_threshold_n: float = 10.0
    torque_threshold_nm: float = 2.0
    staleness_s: float = 0.1


class WrenchGrounding:
    """``contact_force_over_threshold`` from a force/torque sensor (for
    hardware without contact lists)."""

    names = ('contact_force_over_threshold',)

    def __init__(self, config: WrenchConfig) -> None:
        self.config = config
        self.freshness = Freshness(config.staleness_s)
        self._value: bool | None = None
        self._seen = False

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def update(self, stamp_s: float, force_n: Sequence[float], torque_nm: Sequence[float]) -> None:
        if not self.freshness.accept(stamp_s):
            return
        self._seen = True
        values = list(force_n) + list(torque_nm)
        over, known = wrench_over(self.config, np.array([values], dtype=float)) if len(values) == 6 else \
            (np.zeros(1, bool), np.zeros(1, bool))
        if not known[0]:
            self.health.nan_values += 1
            self._value = None
            return
        self._value = bool(over[0])

    def evaluate(self, now_s: float) -> Predicates:
        if not self._seen or not self.freshness.fresh(now_s):
            return all_unknown(self.names)
        return {'contact_force_over_threshold': self._value}


def wrench_over(config: WrenchConfig, wrench: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(over[n], known[n])`` for ``n`` wrenches ``[n, 6]`` (force N, then
    torque N·m): the force's or the torque's magnitude above its threshold;
    unknown where a component is not finite.  The live grounding (one
    sample) and the offline audit (a rollout's samples) share it."""
    over = (norm3(wrench[:, :3]) > config.force_threshold_n) | (norm3(wrench[:, 3:]) > config.torque_threshold_nm)
    return over, np.isfinite(wrench).all(axis=1)
