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

A hold that was not delivered is not a hold.  The node reports every hold
command's fate with :meth:`Supervisor.command_result`; until one was
delivered the supervisor is *not* holding (``held`` is false, the hold is
``pending``), so a later violation sends a command again instead of "alert;
already holding", and :meth:`Supervisor.retry` (called periodically) tries
the pending hold again and, after ``max_hold_failures`` failures, escalates
to ``stop``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..errors import SpecError
from ..spec.fields import Field, validate
from .alerts import ALERTS_SCHEMA

if TYPE_CHECKING:
    from ..spec.suite import Suite

RESPONSES = ('log', 'alert', 'pause', 'retract', 'stop', 'resume')
SEVERITY_DEFAULT = {'critical': 'stop', 'error': 'pause', 'warning': 'alert', 'info': 'log'}
_RANK = {'log': 0, 'alert': 1, 'pause': 2, 'retract': 3, 'stop': 4}
HOLDS = ('pause', 'retract', 'stop')
_RETRY_COUNT = re.compile(r' \(retry \d+\)')


def without_retry_count(reason: str) -> str:
    """A retried action's reason as first given: without its ``(retry N)``."""
    return _RETRY_COUNT.sub('', reason)


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
    def from_mapping(cls, data: Mapping[str, Any], where: str = 'policy') -> 'ResponsePolicy':
        """A policy file's mapping, validated: only ``property``, ``category``, ``severity`` (and
        ``alerts``, read by :class:`~.alerts.AlertConfig`, checked here too); each a mapping of names to one of the responses;
        severities only those there are.  A misspelt section (``categories:``) used to be ignored, leaving
        its properties to the severity default.  ``where``: 'file:line' for the errors.

        Raises:
            SpecError: naming the file, line and field.
        """
        validate(data, POLICY_SCHEMA, where, '')
        return cls({k: str(v) for k, v in (data.get('property') or {}).items()},
                   {k: str(v) for k, v in (data.get('category') or {}).items()},
                   {k: str(v) for k, v in (data.get('severity') or {}).items()})

    def unknown_names(self, properties: Iterable[str], categories: Iterable[str]) -> list[str]:
        """What this policy names that a suite of ``properties`` and ``categories`` does not have (a
        typo there never matches, and the property gets a weaker default response)."""
        props, cats = set(properties), set(categories)
        return [f'property {name!r} is not in the suite (its properties: {", ".join(sorted(props))})'
                for name in self.by_property if name not in props] + \
               [f'category {name!r} is not in the suite (its categories: {", ".join(sorted(cats))})'
                for name in self.by_category if name not in cats]

    def check_against(self, suite: Suite, where: str) -> None:
        """Refuse a policy that names a property or category ``suite`` (what the
        monitor runs) does not have; ``where`` (the policy file) starts the message.

        Raises:
            SpecError: the first unknown name and how many more there are.
        """
        unknown = self.unknown_names((p.name for p in suite.properties), (p.category for p in suite.properties))
        if unknown:
            more = f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''
            raise SpecError(f'{where}: {unknown[0]}{more}')

    def response(self, property: str, category: str, severity: str) -> str:
        for table, key in ((self.by_property, property), (self.by_category, category), (self.by_severity, severity)):
            if key in table:
                return table[key]
        return SEVERITY_DEFAULT.get(severity, 'alert')


_RESPONSE = Field('str', choices=tuple(_RANK))
POLICY_SCHEMA = Field('map', keys={
    'property': Field('dict', values=_RESPONSE), 'category': Field('dict', values=_RESPONSE),
    'severity': Field('map', keys={severity: _RESPONSE for severity in SEVERITY_DEFAULT}),
    'alerts': ALERTS_SCHEMA,
})
"""A supervisor policy file: responses by property, category and severity, and where alerts go."""
ALERTS_FILE_SCHEMA = Field('map', keys={**POLICY_SCHEMA.keys, 'alerts': replace(ALERTS_SCHEMA, required=True)})
"""The file of ``gate --live --alerts``: an ``alerts:`` section, alone or in a supervisor's policy file."""


class Supervisor:
    """Deterministic state machine; every method returns the actions to take."""

    def __init__(self, policy: ResponsePolicy, max_hold_failures: int = 3) -> None:
        self.policy = policy
        self.max_hold_failures = max_hold_failures
        self.holding_for: dict[str, bool] = {}     # instance → recovered yet
        self.stale: set[str] = set()
        self.stopped = False
        self.held = False                          # a hold command was delivered; until a resume
        self.pending: Action | None = None         # a hold asked for but not delivered yet
        self.failed_holds = 0
        self.hold_confirmed = False                # the measured arm stopped after the hold

    @property
    def holding(self) -> bool:
        """A hold is in force or asked for (the operator has something to acknowledge)."""
        return self.held or self.pending is not None

    def on_violation(self, instance: str, property: str, category: str, severity: str) -> list[Action]:
        response = self.policy.response(property, category, severity)
        reason = f'violation of {instance} ({category}, {severity})'
        if response in ('log', 'alert'):
            return [Action(response, instance, property, reason)]
        if response == 'stop':
            self.stopped = True
        self.holding_for[instance] = False
        if self.held and response == 'pause':
            return [Action('alert', instance, property, reason + '; already holding')]
        action = Action(response, instance, property, reason)
        self._ask(action)
        return [action]

    def _ask(self, action: Action) -> None:
        """A hold is asked for: pending until :meth:`command_result` says it was delivered."""
        if self.pending is None or _RANK[action.action] >= _RANK[self.pending.action]:
            self.pending = action

    def on_recovered(self, instance: str) -> list[Action]:
        if instance in self.holding_for:
            self.holding_for[instance] = True
            return [Action('log', instance, '', f'{instance} recovered; waiting for operator acknowledgement')]
        return []

    def on_stale(self, source: str, age_s: float, limit_s: float) -> list[Action]:
        return self.on_fault(source, f'stale for {age_s:.2f} s (limit {limit_s:.2f} s)')

    def on_fault(self, source: str, what: str) -> list[Action]:
        """A fail-safe condition of ``source`` (a stale sensor; a monitor that
        is not active or went silent): a pause, once, held until the source
        is fine again (:meth:`on_fresh`) and the operator acknowledges."""
        if source in self.stale:
            return []
        self.stale.add(source)
        reason = f'fail-safe: {source} {what}'
        if self.held:
            return [Action('alert', reason=reason)]
        action = Action('pause', reason=reason)
        self._ask(action)
        return [action]

    def on_stall(self, stalled_s: float, limit_s: float, what: str = 'the executor',
                 consequence: str = 'nothing was watched meanwhile') -> list[Action]:
        """An executor stalled longer than ``limit_s`` (``what``: the
        supervisor's own, or the one that runs grounding and monitor): a
        fail-safe condition of its own, held until acknowledged like a stale
        sensor that came back."""
        reason = f'fail-safe: {what} stalled for {stalled_s:.2f} s (limit {limit_s:.2f} s); {consequence}'
        if self.held:
            return [Action('alert', reason=reason)]
        action = Action('pause', reason=reason)
        self._ask(action)
        return [action]

    def command_result(self, action: Action, delivered: bool) -> None:
        """What became of a hold command (pause, retract, stop) the node tried
        to send: delivered makes the supervisor hold; a failure leaves it
        not holding, with the hold pending for :meth:`retry`."""
        if action.action not in HOLDS:
            return
        if delivered:
            self.held = True
            self.hold_confirmed = False
            self.pending = None          # failed_holds is kept until the arm confirms (confirm_hold)
        else:
            self.held = False        # also a hold that was sent but never confirmed by the arm
            self.failed_holds += 1
            self._ask(action)

    def confirm_hold(self) -> None:
        """The measured arm stopped after a delivered hold: it is a hold."""
        self.hold_confirmed = True
        self.failed_holds = 0

    def retry(self) -> list[Action]:
        """The pending hold again, or — after ``max_hold_failures`` failed
        attempts — a ``stop`` (escalation).  Empty when nothing is pending."""
        if self.pending is None or self.held:
            return []
        p = self.pending
        first = without_retry_count(p.reason)
        if self.failed_holds >= self.max_hold_failures and p.action != 'stop':
            self.stopped = True
            return [Action('stop', p.instance, p.property,
                           f'{p.action} failed {self.failed_holds} times; escalating to stop ({first})')]
        return [replace(p, reason=f'{first} (retry {self.failed_holds})')]

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
        self.pending = None
        self.failed_holds = 0
        self.hold_confirmed = False
        return [Action('resume', reason='operator acknowledged; all violations recovered')], 'resumed'
