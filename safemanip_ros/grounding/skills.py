"""Skill events of the robot stack → SafeManip's action onsets.

A robot stack usually knows which skill it is executing (a behaviour tree's
action, an action server's goal, a policy's phase) and says so with
``safemanip_ros/SkillEvent`` messages: a START and an END per skill, each
naming the stack's skill and its target entity.  The robot configuration's
``skills:`` section maps the stack's names to SafeManip's actions, and this
source grounds ``<action>_approach`` for each mapped action: true from a
mapped skill's START to its END (the property suite adds SafeManip's
approach persistence and onset edge, exactly as it does for the geometric
``pick_approach``).  Where ``pick`` is mapped it also grounds
``pick_target_<o>`` for each tracked object: true while a running pick skill
names ``o`` as its target; the TF grounding then judges the pick
precondition on that object instead of the one nearest the gripper.

Values:

* before any event, and between an END and the next START: false (events
  are sparse; silence means no skill runs);
* true while at least one START of a skill mapped to the action has had no
  END (skills may overlap; an END matches the START of the same skill and
  target);
* unknown once a skill has run longer than ``max_active_s`` without its END
  (the stack may have died or lost the END), until that skill's END, and
  for ``unknown_after_reset_s`` after a clock reset (a skill running across
  the reset cannot be told apart from one that ended).

An event of an unmapped skill name is counted (:attr:`SkillGrounding.unmapped`)
and otherwise ignored; an event with another phase value is malformed.
Events are applied in stamp order (an older stamp than the newest is
dropped and counted, unless it is a clock reset).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Freshness, InputHealth, Predicates

ACTIONS = ('pick', 'place', 'press', 'turn', 'slide', 'twist', 'open_close', 'dump')
"""SafeManip's action onsets, in its order."""

START, END = 0, 1
"""``SkillEvent.phase`` values."""


@dataclass
class SkillConfig:
    """The ``skills:`` section: ``actions`` maps a stack skill name to one of
    :data:`ACTIONS`; ``topic`` is the SkillEvent topic (empty: no skill
    source)."""

    topic: str = ''
    actions: dict[str, str] = field(default_factory=dict)
    max_active_s: float = 120.0
    unknown_after_reset_s: float = 1.0
    objects: list[str] = field(default_factory=list)    # tracked objects a pick skill may name

    @property
    def mapped(self) -> list[str]:
        """The SafeManip actions some stack skill maps to, in :data:`ACTIONS` order."""
        return [a for a in ACTIONS if a in self.actions.values()] if self.topic else []

    @property
    def target_names(self) -> list[str]:
        """``pick_target_<o>`` per tracked object, where pick is mapped."""
        return [f'pick_target_{o}' for o in self.objects] if 'pick' in self.mapped else []

    @property
    def predicate_names(self) -> list[str]:
        return [f'{a}_approach' for a in self.mapped] + self.target_names


class SkillGrounding:
    """``<action>_approach`` from skill START/END events (module docstring)."""

    def __init__(self, config: SkillConfig) -> None:
        self.config = config
        self.health = InputHealth()
        self.freshness = Freshness(staleness_s=float('inf'), health=self.health)
        self.unmapped: dict[str, int] = {}        # unmapped skill name → events seen
        self._active: dict[tuple[str, str], float] = {}   # (skill, target) → START stamp (s)
        self._reset_at_s: float | None = None

    def update(self, stamp_s: float, skill: str, target: str, phase: int) -> None:
        """One SkillEvent (stamp in seconds)."""
        if phase not in (START, END):
            self.health.malformed += 1
            return
        if skill not in self.config.actions:
            self.unmapped[skill] = self.unmapped.get(skill, 0) + 1
            return
        if not self.freshness.accept(stamp_s):
            return
        if self.freshness.reset_needed:
            self.freshness.reset_needed = False
            self._active.clear()
            self._reset_at_s = stamp_s
        if phase == START:
            self._active[(skill, target)] = stamp_s
        else:
            self._active.pop((skill, target), None)

    def evaluate(self, now_s: float) -> Predicates:
        """Each mapped action's ``<action>_approach`` at ``now_s`` (seconds)."""
        mapped = self.config.mapped
        if self._reset_at_s is not None and 0 <= now_s - self._reset_at_s < self.config.unknown_after_reset_s:
            return {name: None for name in self.config.predicate_names}
        out: Predicates = {f'{a}_approach': False for a in mapped}
        target = self.pick_target(now_s)
        out.update({f'pick_target_{o}': o == target for o in self.config.objects if 'pick' in mapped})
        for (skill, _), since_s in self._active.items():
            if since_s > now_s:          # started after this frame: not yet
                continue
            name = f'{self.config.actions[skill]}_approach'
            if now_s - since_s > self.config.max_active_s:
                if out[name] is not True:
                    out[name] = None     # no END for too long: the stack may be gone
            else:
                out[name] = True
        return out

    def pick_target(self, now_s: float) -> str | None:
        """The tracked object the newest running pick skill names at ``now_s``
        (None: no pick runs, or it names no tracked object)."""
        best: tuple[float, str] | None = None
        for (skill, target), since_s in self._active.items():
            if self.config.actions[skill] == 'pick' and target in self.config.objects and since_s <= now_s \
                    and now_s - since_s <= self.config.max_active_s and (best is None or since_s >= best[0]):
                best = (since_s, target)
        return None if best is None else best[1]

    def active(self) -> list[tuple[str, str, str]]:
        """``(stack skill, target, action)`` of every skill now running."""
        return [(s, t, self.config.actions[s]) for s, t in self._active]


__all__ = ['ACTIONS', 'END', 'START', 'SkillConfig', 'SkillGrounding']
