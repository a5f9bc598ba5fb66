"""Where an alert sink's failures are said: the node's log (each alert given
up or dropped, once) and ``/diagnostics`` (each sink's counts and last error,
at the failure and with the node's own diagnostics)."""

from __future__ import annotations

from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ..supervisor.alerts import FailureHook, SinkStats

__all__ = ['alert_statuses', 'failure_reporter']


def alert_statuses(owner: str, stats: dict[str, SinkStats]) -> list[DiagnosticStatus]:
    """One status per sink (``stats``: a dispatcher's), named
    ``safemanip/<owner>/alerts/<sink>``: ERROR once an alert was given up or
    dropped, else OK."""
    out = []
    for sink, st in stats.items():
        lost = st.failed + st.dropped
        out.append(DiagnosticStatus(
            level=DiagnosticStatus.ERROR if lost else DiagnosticStatus.OK, name=f'safemanip/{owner}/alerts/{sink}',
            message=f'{lost} alert(s) not delivered: {st.last_error}'[:400] if lost else 'delivering',
            values=[KeyValue(key=k, value=str(v)) for k, v in (
                ('delivered', st.delivered), ('failed', st.failed), ('dropped', st.dropped), ('retries', st.retries),
                ('last_error', st.last_error[:400]))]))
    return out


def failure_reporter(node: Any, owner: str, publisher: Any) -> FailureHook:
    """An ``on_failure`` hook for ``node``'s dispatcher: an error line in the
    node's log and the sinks' statuses on ``publisher`` (``/diagnostics``).
    Called from a sink's thread: rclpy's publish and logging are thread-safe."""
    def report(sink: str, reason: str, stats: dict[str, SinkStats]) -> None:
        node.get_logger().error(f'alerts: {sink}: {reason}')
        arr = DiagnosticArray()
        arr.header.stamp = node.get_clock().now().to_msg()
        arr.status = alert_statuses(owner, stats)
        publisher.publish(arr)
    return report
