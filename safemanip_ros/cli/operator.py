"""``safemanip ack`` and ``safemanip resume``: the operator's side of a hold.

Both call the supervisor's ``std_srvs/Trigger`` services over DDS:

* ``safemanip ack`` calls ``/supervisor/acknowledge`` (``--release-stop``:
  ``/supervisor/acknowledge_stop``, which also releases a ``stop``).  The
  supervisor resumes (publishes ``resume`` on ``supervisor_actions`` and
  calls its ``resume_service``) only when every violation that caused the
  hold has recovered and no watched sensor is stale; otherwise it answers
  why not.  The answer is printed; exit 0 when it resumed.
* ``safemanip resume`` is ``ack`` that waits (``--wait-s``) until the hold
  can be released, retrying once per second, so an operator can ask for the
  resume as soon as it is allowed.

Exit codes: 0 resumed, 1 not resumed (the reason is printed), 2 no
supervisor answered.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, helptext in (('ack', 'acknowledge a hold: the supervisor resumes if everything has recovered'),
                           ('resume', 'acknowledge, retrying until the supervisor resumes or --wait-s passes')):
        p = sub.add_parser(name, help=helptext, description=__doc__.split('\n\n')[0])
        p.add_argument('--supervisor', default='/supervisor', help='the supervisor node (default /supervisor)')
        p.add_argument('--release-stop', action='store_true', help='also release a stop (acknowledge_stop)')
        p.add_argument('--timeout-s', type=float, default=5.0, help='wait this long for the service (default 5)')
        if name == 'resume':
            p.add_argument('--wait-s', type=float, default=30.0, help='keep asking this long (default 30)')
        p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from std_srvs.srv import Trigger

    from ..errors import SafemanipError
    from ..ros_names import topic_problem
    from .options import check_wait
    from .ros_client import client_node
    from .text import printable

    check_wait('--timeout-s', args.timeout_s)
    if hasattr(args, 'wait_s'):
        check_wait('--wait-s', args.wait_s, zero=True)
    supervisor = args.supervisor.rstrip('/')
    problem = topic_problem(supervisor) if supervisor else 'an empty node name'
    if problem:
        raise SafemanipError(f'--supervisor {problem}: give the supervisor node, e.g. /supervisor')
    service = f'{supervisor}/{"acknowledge_stop" if args.release_stop else "acknowledge"}'
    with client_node('safemanip_operator', list(args.ros_args[1:] if args.ros_args else [])) as (node, executor):
        client: Any = node.create_client(Trigger, service)
        if not client.wait_for_service(timeout_sec=args.timeout_s):
            raise SafemanipError(f'no service {service} within {args.timeout_s:g} s: is the supervisor running?')
        deadline = time.monotonic() + getattr(args, 'wait_s', 0.0)
        while True:
            future = client.call_async(Trigger.Request())
            executor.spin_until_future_complete(future, timeout_sec=args.timeout_s)
            if not future.done():
                raise SafemanipError(f'{service} did not answer within {args.timeout_s:g} s')
            answer: Any = future.result()
            if answer.success or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        print(f'{service}: {printable(answer.message)}')
        return 0 if answer.success else 1
