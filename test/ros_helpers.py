"""Scaffolding for tests of real rclpy nodes over DDS, in one place: a test
node in its own context with an executor, spinning until a condition holds,
calling a service, and one of our node executables in its own process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
"""Reliable, depth 50: what the tests subscribe and publish with unless a topic needs its own QoS."""


@contextmanager
def ros_node(name: str, args: list[str] | None = None) -> Iterator[tuple[Node, SingleThreadedExecutor]]:
    """A node named ``name`` in a context of its own (``args``: its ROS
    arguments), with a single-threaded executor; both shut down afterwards."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=args)
    node = rclpy.create_node(name, context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=ctx)


def spin_until(executor: SingleThreadedExecutor, cond: Callable[[], bool], timeout_s: float = 30.0,
               each: Callable[[], object] | None = None) -> bool:
    """Spin (20 ms at a time, calling ``each`` first, e.g. to publish a frame)
    until ``cond`` holds or ``timeout_s`` passed: tests wait for conditions,
    never for wall-clock luck."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if each is not None:
            each()
        executor.spin_once(timeout_sec=0.02)
        if cond():
            return True
    return False


def call_service(node: Node, executor: SingleThreadedExecutor, srv_type: Any, name: str, request: Any,
                 timeout_s: float = 30.0) -> Any:
    """The answer of service ``name`` to ``request`` (an assertion error naming it if there is none)."""
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout_s), f'{name} not available'
    future = client.call_async(request)
    assert spin_until(executor, future.done, timeout_s), f'{name} did not answer'
    return future.result()


@contextmanager
def node_process(executable: str, *ros_args: str, log: Path) -> Iterator[subprocess.Popen]:
    """Our ``executable`` (installed beside this Python) in its own process,
    with ``--ros-args`` ``ros_args``, its output in the file ``log`` (not a
    pipe: a full pipe would block the node); terminated afterwards."""
    out = open(log, 'w')
    proc = subprocess.Popen([str(Path(sys.executable).parent / executable), '--ros-args', *ros_args],
                            stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        stop_process(proc)
        out.close()


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if ``proc`` has not ended within ``grace_s``
    (what is under test has run by then; how fast a loaded machine stops a
    DDS participant is not)."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def echo_process(prefix: str, types: Iterable[str], log: Path) -> Iterator[subprocess.Popen]:
    """``test/helpers/echo_node.py`` republishing ``types`` under
    ``prefix``, started and READY; its stderr in the file ``log`` (a pipe
    nobody reads fills with DDS warnings on a busy graph and blocks it)."""
    err = open(log, 'w')
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / 'helpers' / 'echo_node.py'),
                             '--prefix', prefix, *types], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == 'READY', f'echo node: {line!r}; stderr: {log.read_text()[-2000:]}'
        yield proc
    finally:
        stop_process(proc, grace_s=3.0)
        err.close()
