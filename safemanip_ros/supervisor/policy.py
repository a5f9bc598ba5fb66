"""Response policy and the supervisor's hold/resume state machine.

The response to a violation is looked up by property, then category, then
severity (first match wins), else the severity default: ``critical`` →
``stop``, ``error`` → ``pause``, ``warning`` → ``alert``, ``info`` → ``log``.

``pause``, ``retract`` and ``stop`` put the supervisor in *holding*: the arm
is held (or retracted, then held) until every violation that caused a hold
has recovered (its episode closed by the recovery formula) **and** an
operator acknowledges; only then is ``resume`` issued.  A stale sensor (the
fail-safe) also holds, released when the sensor is fresh again and
acknowledged.  ``stop`` additionally needs the acknowledgement to say so
explicitly (a stopped robot is never resumed by a routine acknowledgement).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

RESPONSES = ('log', 'alert', 'pause', 'retract', 'stop', 'resume')
SEVERITY_DEFAULT = {'critical': 'stop', 'error': 'pause', 'warning': 'alert', 'info': 'log'}
_RANK = {'log': 0, 'alert': 1, 'pause': 2, 'retract': 3, 'stop': 4}


@dataclass(frozen=True)
class Action:
    action: str            # one of RESPONSES
    instance: str = ''
    property: str = ''
    reason: str = ''


@dataclass
class ResponsePolicy:
    by_property: dict[str, str] = field(default_factory=dict)
    by_category: dict[str, str] = field(default_factory=dict)
    by_severity: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping) -> 'ResponsePolicy':
        out = cls({k: str(v) for k, v in (data.get('property') or {}).items()},
                  {k: str(v) for k, v in (data.get('category') or {}).items()},
                  {k: str(v) for k, v in (data.get('severity') or {}).items()})
        for table in (out.by_property, out.by_category, out.by_severity):
            for key, value in table.items():
                if value not in _RANK:
                    raise ValueError(f'response for {key!r} is {value!r}; expected one of {sorted(_RANK)}')
        return out

    def response(self, property: str, category: str, severity: str) -> str:
        for table, key in ((self.by_property, property), (self.by_category, category), (self.by_severity, severity)):
            if key in table:
                return table[key]
        return SEVERITY_DEFAULT.get(severity, 'alert')


class Supervisor:
    """Deterministic state machine; every method returns the actions to take."""

    def __init__(self, policy: ResponsePolicy) -> None:
        self.policy = policy
        self.holding_for: dict[str, bool] = {}     # instance → recovered yet
        self.stale: set[str] = set()
        self.stopped = False
        self.held = False                          # the arm is held until a resume

    @property
    def holding(self) -> bool:
        return self.held

    def on_violation(self, instance: str, property: str, category: str, severity: str) -> list[Action]:
        response = self.policy.response(property, category, severity)
        reason = f'violation of {instance} ({category}, {severity})'
        if response in ('log', 'alert'):
            return [Action(response, instance, property, reason)]
        already = self.holding
        if response == 'stop':
            self.stopped = True
        self.holding_for[instance] = False
        self.held = True
        if already and response == 'pause':
            return [Action('alert', instance, property, reason + '; already holding')]
        return [Action(response, instance, property, reason)]

    def on_recovered(self, instance: str) -> list[Action]:
        if instance in self.holding_for:
            self.holding_for[instance] = True
            return [Action('log', instance, '', f'{instance} recovered; waiting for operator acknowledgement')]
        return []

    def on_stale(self, source: str, age_s: float, limit_s: float) -> list[Action]:
        if source in self.stale:
            return []
        already = self.holding
        self.stale.add(source)
        self.held = True
        reason = f'fail-safe: {source} stale for {age_s:.2f} s (limit {limit_s:.2f} s)'
        return [Action('alert' if already else 'pause', reason=reason)]

    def on_fresh(self, source: str) -> list[Action]:
        if source in self.stale:
            self.stale.discard(source)
            return [Action('log', reason=f'{source} fresh again; waiting for operator acknowledgement')]
        return []

    def acknowledge(self, release_stop: bool = False) -> tuple[list[Action], str]:
        """Operator acknowledgement: resume when nothing still holds."""
        if not self.holding:
            return [], 'nothing to acknowledge'
        pending = sorted(i for i, ok in self.holding_for.items() if not ok)
        if pending:
            return [], f'not resuming: {", ".join(pending)} not recovered'
        if self.stale:
            return [], f'not resuming: {", ".join(sorted(self.stale))} still stale'
        if self.stopped and not release_stop:
            return [], 'not resuming: stopped (acknowledge with release_stop)'
        self.holding_for.clear()
        self.stopped = False
        self.held = False
        return [Action('resume', reason='operator acknowledged; all violations recovered')], 'resumed'
