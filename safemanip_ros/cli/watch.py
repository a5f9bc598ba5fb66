"""``safemanip watch``: a live operator view in the terminal.

Subscribes to the monitor's ``verdicts``, ``violations`` and ``status`` and
the supervisor's ``supervisor_actions`` and redraws a compact table twice a
second: every property instance with its verdict and mode, then the most
recent violation events and supervisor actions.  ``--once`` prints one
snapshot as soon as every instance's verdict has arrived and exits (for
scripts and logs).

The monitor publishes every instance's verdict now and then and, between,
only those that changed: the table is their merge within the rollout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from ..monitor.board import VerdictBoard
from .text import printable

VERDICTS = {0: 'FALSE', 1: 'true', 2: 'presumably false', 3: 'presumably true'}
ACTIONS = {0: 'log', 1: 'alert', 2: 'PAUSE', 3: 'RETRACT', 4: 'STOP', 5: 'resume'}


FULL_SET_WAIT_S = 1.5
"""``--once``: how long to wait past the first verdicts for the rest of the
instances (the monitor lists them all at least every second by default)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('watch', help='live terminal table of verdicts, violations and supervisor actions',
                       description=__doc__.split('\n\n')[1] if __doc__ else None)
    p.add_argument('--once', action='store_true', help='print one snapshot when verdicts arrive, then exit')
    p.add_argument('--timeout-s', type=float, default=30.0, help='with --once: give up after this long')
    p.add_argument('--recent', type=int, default=8, help='how many recent events to show')
    p.set_defaults(func=run)


def render(board: VerdictBoard | None, status: Any, events: Iterable[Any], actions: Iterable[Any],
           width: int = 100) -> str:
    """The table as text; every string that came from a topic is escaped
    (:func:`~.text.printable`), so topic data cannot drive the terminal."""
    lines = []
    if status is not None:
        unknown = [printable(n) for n in status.unknown_predicates[:6]]
        lines.append(f'rollout {printable(status.episode_id) or "-"}  frames {status.frames}  '
                     f'overruns {status.overruns}  violated {status.violated}/{status.instances}  '
                     f'unknown predicates: {", ".join(unknown) or "none"}'
                     f'{" ..." if len(status.unknown_predicates) > 6 else ""}')
    if board is not None:
        lines.append(f'{"property instance":60s} {"verdict":17s} mode')
        for v in sorted(board.by_instance.values(), key=lambda v: (v.mode == 0, v.instance)):
            mark = '!!' if v.mode == 1 else '  '
            lines.append(f'{mark}{printable(v.instance)[:58]:58s} {VERDICTS.get(v.verdict, "?"):17s} '
                         f'{"VIOLATED" if v.mode == 1 else "watching"}')
    lines.append('recent violations:')
    for e in events:
        kind = {0: 'opened', 1: 'closed', 2: 'pending'}.get(e.event, '?')
        lines.append(f'  frame {e.start_frame:>6}-{e.end_frame:<6} {kind:7s} {printable(e.instance)} '
                     f'{"(recovered)" if e.recovered else ""}')
    lines.append('supervisor actions:')
    for a in actions:
        lines.append(f'  {ACTIONS.get(a.action, "?"):8s} {printable(a.reason)}{"" if a.success else "  [FAILED]"}')
    return '\n'.join(line[:width] for line in lines)


def run(args: argparse.Namespace) -> int:
    from .options import check_number, check_wait
    check_wait('--timeout-s', args.timeout_s)
    check_number('--recent', args.recent, 0, 10000)
    from safemanip_ros.msg import MonitorStatus, SupervisorAction, VerdictArray, ViolationEvent

    from ..nodes.qos import RELIABLE as qos
    from .ros_client import client_node
    state: dict[str, Any] = {'verdicts': None, 'status': None}
    board = VerdictBoard()

    def on_verdicts(msg: Any) -> None:
        board.update(msg)
        state['verdicts'] = board
    events: deque[Any] = deque(maxlen=args.recent)
    actions: deque[Any] = deque(maxlen=args.recent)
    try:
        with client_node('safemanip_watch', list(args.ros_args[1:] if args.ros_args else [])) as (node, executor):
            node.create_subscription(VerdictArray, 'verdicts', on_verdicts, qos)
            node.create_subscription(MonitorStatus, 'status', lambda m: state.__setitem__('status', m), qos)
            node.create_subscription(ViolationEvent, 'violations', lambda m: events.append(m), qos)
            node.create_subscription(SupervisorAction, 'supervisor_actions', lambda m: actions.append(m), qos)
            if args.once:
                return _once(args, executor, state, board, events, actions)
            next_draw = 0.0
            while True:
                executor.spin_once(timeout_sec=0.05)
                if time.monotonic() >= next_draw:
                    next_draw = time.monotonic() + 0.5
                    width = os.get_terminal_size().columns if sys.stdout.isatty() else 100
                    sys.stdout.write('\x1b[H\x1b[2J' + render(state['verdicts'], state['status'], events, actions,
                                                              width) + '\n')
                    sys.stdout.flush()
    except KeyboardInterrupt:
        return 0       # Ctrl-C or SIGTERM: the operator's way out of the view, not an error


def _once(args: argparse.Namespace, executor: Any, state: dict[str, Any], board: VerdictBoard,
          events: deque[Any], actions: deque[Any]) -> int:
    """``--once``: one snapshot when every instance's verdict has arrived."""
    deadline = time.monotonic() + args.timeout_s
    while state['verdicts'] is None and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    rest_deadline = time.monotonic() + FULL_SET_WAIT_S
    while state['verdicts'] is not None and time.monotonic() < rest_deadline and not (
            state['status'] is not None and len(board) >= state['status'].instances):
        executor.spin_once(timeout_sec=0.02)
    for _ in range(10):   # let events of the same moment arrive
        executor.spin_once(timeout_sec=0.02)
    if state['verdicts'] is None:
        print(f'safemanip watch: no verdicts on /verdicts within {args.timeout_s} s (is the monitor active?)',
              file=sys.stderr)
        return 1
    print(render(state['verdicts'], state['status'], events, actions))
    return 0
