"""``gate_node``: the deployment gate, live — decides as a canary runs.

A thin adapter around :class:`~safemanip_ros.audit.sequential.CanaryGate`
(the same anytime-valid tests as ``safemanip gate --sequential``): it
subscribes to the monitor's final metrics of each robot
(``<robot>/metrics/final``, safemanip_ros/MonitorMetrics, latched: a gate that
comes up late still gets the monitor's last 100 rollouts) and counts every
rollout once, by its rollout id; each limit is decided per robot and pooled
over the fleet.

Publishes ``gate/decisions`` (safemanip_ros/GateDecision, one per limit and
robot plus the pooled one; latched) after every counted rollout, and
``/diagnostics`` at 1 Hz (OK passed, WARN undecided, ERROR failed; counts
and evidence as key-values).  Its state is written atomically to
``state_file`` after every rollout and read back at start, so a restarted
gate continues where it stopped.

Parameters:
    limits (string[], required): ``NAME=X`` per limited property or category.
    robots (string[], ['']): robot namespaces ('' : the monitor's own topics).
    unit (string, 'trigger'): 'trigger' or 'rollout'.
    alpha (double, 0.05): family-wise level of a wrong PASS (and of a wrong FAIL).
    state_file (string, ''): where the state persists ('' : nowhere).
    max_rollouts (int, 0): stop undecided after this many pooled rollouts (0: no budget).
    max_duration_s (double, 0.0): stop undecided after this long (0: no budget).
    rebuild_from (string[], ['']): bags whose recorded final metrics are
        counted first (a gate whose state was lost, or started late).
    alerts_file (string, ''): a YAML file whose ``alerts:`` section sends each
        decision to people (JSON lines, webhook: supervisor/alerts.py).

The process exits 0 when every limit passed, 1 when one failed (the
failing robots and limits are logged), 4 when a budget ran out undecided.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from safemanip_ros.msg import GateDecision, MonitorMetrics

from ..atomic_file import write_text_atomically
from ..audit.gate import parse_limits
from ..audit.sequential import FAIL, PASS, POOLED, CanaryGate, plain_decision, rollout_rows, rollouts_from_bags
from ..errors import ParameterError, SafemanipError, SpecError
from ..file_lock import StateLock
from ..settings import GATE, named
from ..spec.fields import validate
from ..spec.yamlio import load_yaml
from ..stamps import utc_now
from ..supervisor.alerts import AlertConfig, AlertDispatcher
from ..supervisor.policy import ALERTS_FILE_SCHEMA
from .alert_reporting import alert_statuses, failure_reporter
from .params import RosParameters, check_setting, declare_settings
from .qos import FINAL_METRICS, RELIABLE, latched
from .runner import run_node, wait_acked

EXIT = {PASS: 0, FAIL: 1, None: 4}
_CODES = {None: GateDecision.UNDECIDED, PASS: GateDecision.PASS, FAIL: GateDecision.FAIL}


def checked_limits(items: list[str]) -> dict[str, float]:
    """The ``limits`` parameter: ``NAME=X`` items with X a rate strictly between 0 and 1."""
    try:
        limits = parse_limits(items, 'limit')
    except SafemanipError as exc:
        raise ParameterError(exc.one_line()) from None
    bad = [f'{n}={x:g}' for n, x in limits.items() if not 0 < x < 1]
    if bad:
        raise ParameterError(f'limit {", ".join(bad)}: a rate strictly between 0 and 1')
    if not limits:
        raise ParameterError('no limits: give at least one NAME=X')
    return limits


class GateNode(RosParameters, Node):
    def __init__(self) -> None:
        super().__init__('gate')
        declare_settings(self, GATE)
        def p(name: str) -> Any:
            return self.get_parameter(name).value
        limits = checked_limits([x for x in p('limits') if x])
        unit = str(p('unit'))
        if unit not in ('trigger', 'rollout'):
            raise ParameterError(f'unit {unit!r}: trigger or rollout')
        alpha = float(check_setting(self, named(GATE, 'alpha')))
        self.state_file = Path(p('state_file')) if p('state_file') else None
        if self.state_file is not None and self.state_file.is_dir():
            raise ParameterError(f'state_file {self.state_file}: is a folder; give a file path')
        self.gate = CanaryGate(limits, unit, alpha)
        alerts = AlertConfig()
        if p('alerts_file'):
            try:
                doc = load_yaml(p('alerts_file'))
                validate(doc, ALERTS_FILE_SCHEMA, f'{p("alerts_file")}:1', '')    # a misspelt alerts: sends none
                alerts = AlertConfig.from_mapping(doc['alerts'], f'{p("alerts_file")}:1')
            except SpecError as exc:
                raise ParameterError(f'alerts_file: {exc.one_line()}') from None
        self.max_duration_s = float(check_setting(self, named(GATE, 'max_duration_s')))
        self.max_rollouts = int(check_setting(self, named(GATE, 'max_rollouts')))
        self._lock: StateLock | None = None
        if self.state_file is not None:
            try:
                self.state_file.parent.mkdir(parents=True, exist_ok=True)
                self._lock = StateLock(self.state_file)
            except (OSError, SafemanipError) as exc:
                raise ParameterError(f'state_file: {exc.one_line() if isinstance(exc, SafemanipError) else exc}') \
                    from None
        if self.state_file is not None and self.state_file.exists():
            try:
                doc = json.loads(self.state_file.read_text())
                restored = CanaryGate.from_json(doc)
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise ParameterError(f'state_file {self.state_file}: not a gate state ({exc})') from None
            except OSError as exc:
                raise ParameterError(f'state_file {self.state_file}: cannot be read ({exc.strerror})') from None
            if (restored.limits, restored.unit, restored.alpha) != (limits, unit, alpha):
                raise ParameterError(f'state_file {self.state_file} holds a gate with other limits, unit or alpha; '
                                     f'give a new state_file')
            self.gate = restored
            self.get_logger().info(f'continuing from {self.state_file}: {len(self.gate.seen)} rollouts counted')
        self._pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', RELIABLE)
        self.alerts = AlertDispatcher.from_config(alerts, failure_reporter(self, 'gate', self._pub_diag))
        self._names_heard: set[str] = set()      # every property and category the rollouts reported
        bags = [b for b in p('rebuild_from') if b]
        if bags:
            try:
                recorded = rollouts_from_bags(bags)
            except SafemanipError as exc:
                raise ParameterError(f'rebuild_from: {exc.one_line()}') from None
            counted = 0
            for _, robot, rollout, rows in recorded:
                before = self._decisions()
                counted += self._count(robot, rollout, rows)
                self._alert_new_decisions(before)     # a decision reached on the recording is said like a live one
            self.get_logger().info(f'counted {counted} recorded rollouts from {len(bags)} bag(s)')
        if self.state_file is not None:
            try:        # written now (with what was rebuilt), so a state that cannot be kept stops the gate at start
                write_text_atomically(self.state_file, [json.dumps(self.gate.to_json())])
            except OSError as exc:
                raise ParameterError(f'state_file {self.state_file}: cannot be written ({exc.strerror})') from None
        self.started = time.monotonic()
        self.robots = [str(r).strip('/') for r in p('robots')] or ['']
        self.outcome: str | None = None
        self.finished = False
        self._pub = self.create_publisher(GateDecision, 'gate/decisions', latched(256))
        for robot in self.robots:
            topic = f'/{robot}/metrics/final' if robot else 'metrics/final'
            self.create_subscription(MonitorMetrics, topic, lambda msg, r=robot: self._on_metrics(r, msg),
                                     FINAL_METRICS)
        self.create_timer(1.0, self._diagnostics)
        if self.max_duration_s:     # the budget ends with no rollout arriving too
            self._budget_timer = self.create_timer(self.max_duration_s, self._check_done)
        self.get_logger().info(
            f'gate: watching {", ".join(f"/{r}/metrics/final" if r else "metrics/final" for r in self.robots)} for '
            f'{", ".join(f"{n} <= {x:g}" for n, x in limits.items())} (unit {unit}, family-wise alpha {alpha:g})')
        self._publish()
        self._check_done()

    def _on_metrics(self, robot: str, msg: MonitorMetrics) -> None:
        if not msg.final or self.finished:
            return
        before = self._decisions()
        if not self._count(robot, msg.episode_id, rollout_rows(msg)):
            return
        self._alert_new_decisions(before)
        if self.state_file is not None:
            write_text_atomically(self.state_file, [json.dumps(self.gate.to_json())])
        self._publish()
        self._check_done()

    def _count(self, robot: str, rollout: str, rows: list[tuple[str, str, int, int]]) -> bool:
        """Count one rollout; the limits that name nothing the rollouts report
        so far are said once (rclpy's ``once``: the first time any is), and
        again when the gate ends (:meth:`_check_done`)."""
        if not self.gate.add_rollout(robot, rollout, rows):
            return False
        self._names_heard.update(n for prop, cat, _, _ in rows for n in (prop, cat))
        unheard = [repr(name) for name in self.gate.limits if name not in self._names_heard]
        if unheard:
            self.get_logger().warning(
                f'gate: limit {", ".join(unheard)} matches no property or category of the rollouts so far (they '
                f'report: {", ".join(sorted(self._names_heard)[:12]) or "nothing"}): it can only stay undecided',
                once=True)
        return True

    def _decisions(self) -> dict[tuple[str, str], str | None]:
        return {k: s.decision for k, s in self.gate.streams.items()}

    def _alert_new_decisions(self, before: dict[tuple[str, str], str | None]) -> None:
        """Send each decision reached since ``before`` to the alert sinks, in plain words."""
        for (who, name), s in self.gate.streams.items():
            if s.decision is not None and before.get((who, name)) is None:
                test = self.gate.tests[name]
                self.alerts.submit({
                    'type': 'gate', 'name': name, 'robot': who or 'fleet', 'decision': s.decision,
                    'summary': plain_decision(name, who, s.observations, s.violations, s.rollouts, test,
                                              self.gate.unit, s.decision, s.decided_after),
                    'time_utc': utc_now(), 'unit': self.gate.unit, 'limit': self.gate.limits[name],
                    'alpha': test.alpha, 'observations': s.observations, 'violations': s.violations,
                    'rollouts': s.rollouts, 'decided_after': s.decided_after},
                    key=f'{who}/{name}', subject=f'{who}/{name}')

    def _check_done(self) -> None:
        outcome = self.gate.outcome()
        # The budget counts every rollout heard, whether or not it reported a limited name: a limit that
        # matches nothing must still end when the budget is spent.
        out_of_budget = (self.max_rollouts and len(self.gate.seen) >= self.max_rollouts) or \
            (self.max_duration_s and time.monotonic() - self.started >= self.max_duration_s)
        if outcome is not None or out_of_budget:
            self.outcome, self.finished = outcome, True
            for robot, name in self._rows():
                s = self.gate.stream(robot, name)
                line = 'gate: ' + plain_decision(name, robot, s.observations, s.violations, s.rollouts,
                                                 self.gate.tests[name], self.gate.unit, s.decision, s.decided_after)
                if s.decision == FAIL:      # one severity per call site: rclpy's rule
                    self.get_logger().error(line)
                else:
                    self.get_logger().info(line)
            unmatched = [n for n in self.gate.limits if n not in self._names_heard and not self.gate.stream(
                POOLED, n).rollouts]
            if unmatched and self.gate.seen:
                self.get_logger().error(f'gate: {", ".join(unmatched)} matched no property or category in '
                                        f'{len(self.gate.seen)} rollout(s); they report: '
                                        f'{", ".join(sorted(self._names_heard)[:20]) or "nothing"}')
            if outcome == FAIL:
                who = ', '.join(f'{n} ({r or "fleet"})' for r, n in self.gate.failures())
                self.get_logger().error(f'gate: FAIL: {who}')
            else:
                self.get_logger().info(f'gate: {outcome or "UNDECIDED (budget spent)"}')

    def _rows(self) -> list[tuple[str, str]]:
        return [(robot, name) for name in self.gate.limits for robot in [POOLED, *self.gate.robots()]]

    def _publish(self) -> None:
        stamp = self.get_clock().now().to_msg()
        for robot, name in self._rows():
            s = self.gate.stream(robot, name)
            test = self.gate.tests[name]
            msg = GateDecision(name=name, robot=robot, unit=self.gate.unit, limit=test.limit, alpha=test.alpha,
                               decision=_CODES[s.decision], observations=s.observations, violations=s.violations,
                               rollouts=s.rollouts, decided_after=s.decided_after or 0)
            msg.header.stamp = stamp
            self._pub.publish(msg)

    def _diagnostics(self) -> None:
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        for robot, name in self._rows():
            s = self.gate.stream(robot, name)
            level = DiagnosticStatus.OK if s.decision == PASS else DiagnosticStatus.ERROR if s.decision == FAIL \
                else DiagnosticStatus.WARN
            test = self.gate.tests[name]
            arr.status.append(DiagnosticStatus(
                level=level, name=f'safemanip/gate/{robot or "fleet"}/{name}',
                message=s.decision or 'undecided', values=[
                    KeyValue(key='n', value=str(s.observations)), KeyValue(key='k', value=str(s.violations)),
                    KeyValue(key='rollouts', value=str(s.rollouts)), KeyValue(key='limit', value=f'{test.limit:g}'),
                    KeyValue(key='log_evidence_below', value=f'{float(test.log_evidence(s.observations, s.violations, False)):.3f}'
                             if s.observations else '0'),
                    KeyValue(key='log_evidence_above', value=f'{float(test.log_evidence(s.observations, s.violations, True)):.3f}'
                             if s.observations else '0'),
                    KeyValue(key='threshold', value=f'{test.threshold:.3f}')]))
        arr.status += alert_statuses('gate', self.alerts.stats())
        self._pub_diag.publish(arr)


def main(args: list[str] | None = None, foxglove: bool = False) -> int:
    """The gate node; ``foxglove``: with a Foxglove server beside it (its
    parameters among ``args``)."""
    result: dict[str, int] = {}

    def on_exit(node: GateNode) -> None:
        node._diagnostics()
        # The final decisions are latched only while this process lives: acknowledged
        # by the subscribers before it exits, as the players and `safemanip run` do.
        wait_acked([node._pub, node._pub_diag])
        node.alerts.close(timeout_s=2.0)      # give the decision a moment to leave
        result['rc'] = EXIT[node.outcome] if node.finished else 4

    beside = None
    if foxglove:
        from .foxglove_node import FoxgloveNode
        beside = FoxgloveNode
    rc = run_node(GateNode, 'gate', args, until=lambda node: node.finished, on_exit=on_exit, beside=beside)
    return rc if rc else result.get('rc', rc)
