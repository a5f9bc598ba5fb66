"""``safemanip``: the command-line entry point.

Each subcommand lives in its own module exposing ``register(subparsers)``;
bad input makes a subcommand raise :class:`~safemanip_ros.errors.SafemanipError`,
which is printed as one line (``safemanip: error: ...``) with exit code 2.  Any
other exception is a bug in safemanip, never "bad input": it is reported as
an internal error (exit 70) and, with ``--debug``, with its traceback.  Output
cut off by its reader (a closed pipe) ends the command quietly, exit 141.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Sequence

from .. import __version__
from ..errors import SafemanipError
from . import (
    audit,
    bag,
    bench,
    check,
    config_cmd,
    demo,
    doctor,
    monitor_trace,
    ontology,
    operator,
    predicates,
    run,
    specrl,
    watch,
)
from . import compile as compile_cmd

INTERNAL_ERROR = 70   # EX_SOFTWARE

SUBCOMMANDS = (check, compile_cmd, monitor_trace, predicates, ontology, config_cmd, run, watch, operator, audit, bag,
               doctor, demo, bench, specrl)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='safemanip',
        description='Runtime safety monitor for robot manipulation: LTLf properties compiled to DFAs, '
                    'live on ROS 2 and offline over recorded rollouts.')
    parser.add_argument('--version', action='version', version=f'safemanip_ros {__version__}')
    parser.add_argument('--debug', action='store_true', help='show the traceback of an internal error')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything from --ros-args on belongs to ROS (parameters, remaps, log
    # level), as for any ROS 2 executable; the commands that start nodes pass it on.
    ros_args: list[str] = []
    if '--ros-args' in argv:
        cut = argv.index('--ros-args')
        argv, ros_args = argv[:cut], argv[cut:]
    args = parser.parse_args(argv)
    args.ros_args = ros_args
    if ros_args and args.command not in ('run', 'ack', 'resume', 'watch'):
        parser.error(f'{args.command} starts no ROS node: --ros-args is not accepted')
    try:
        return int(args.func(args) or 0)
    except SafemanipError as err:
        print(f'safemanip: error: {err.one_line()}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('safemanip: interrupted', file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Whoever read our output stopped (``safemanip compile ... | head``): not a bug. Quiet,
        # with the status of a process SIGPIPE ended; stdout goes nowhere, so the exit flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as err:     # not bad input: a bug of ours, said so
        if args.debug:
            raise
        print(f'safemanip: internal error (a bug in safemanip, please report it): {type(err).__name__}: {err}; '
              f'run with --debug for the traceback', file=sys.stderr)
        return INTERNAL_ERROR


if __name__ == '__main__':
    sys.exit(main())
