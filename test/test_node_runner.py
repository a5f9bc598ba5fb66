"""``nodes.runner.run_node``: a node's executable ends cleanly however
shutdown reaches it (real rclpy context and node)."""

from __future__ import annotations

import pytest
import rclpy
from rclpy.node import Node

from safemanip_ros.nodes.runner import run_node


# rclpy's spin_once builds an executor, which fails on the shut-down context and then complains in
# its own __del__ (an rclpy quirk, printed, not raised): not what this test is about.
@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')
def test_a_shutdown_between_ok_and_the_next_spin_ends_the_node_cleanly():
    """SIGINT's handler shuts the context down on a thread of its own, so it
    can land after the loop's ``rclpy.ok()`` and before its next spin, which
    then raises a bare RuntimeError.  That is the shutdown asked for: the
    executable exits 0, runs its exit hook and tears down without a trace."""
    made: list[Node] = []
    asked: list[Node] = []
    exited: list[Node] = []

    def factory() -> Node:
        made.append(Node('runner_probe'))
        return made[-1]

    def until(node: Node) -> bool:
        asked.append(node)
        rclpy.shutdown()           # what SIGINT's handler does, at the worst moment
        return False

    assert run_node(factory, 'probe', [], until=until, on_exit=exited.append) == 0
    assert len(made) == 1 and asked == made and exited == made
    assert not rclpy.ok()
