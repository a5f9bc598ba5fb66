"""Checks of command-line options: a number out of range, or an output
folder that cannot be made or written, is a one-line error naming the
option, never a silent misbehaviour (``--staleness-s nan`` once made every
predicate unknown) or an internal error (``--out /proc/x``)."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from ..errors import SafemanipError
from ..settings import RATE_HZ, STALENESS_S, Setting


def check_number(option: str, value: float, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` if it is finite and within [low, high] (open ends where
    asked); else a :class:`SafemanipError` naming ``option``."""
    if value is None:
        return value
    ok = math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = '' if low is None else f'{"(" if low_open else "["}{low:g}'
        hi = '' if high is None else f'{high:g}{")" if high_open else "]"}'
        expect = f'in {lo or "(-inf"}, {hi or "inf)"}' if (lo or hi) else 'finite'
        raise SafemanipError(f'{option} {value!r}: expected a finite number {expect}')
    return value


def check_setting(option: str, value: float, setting: Setting) -> float:
    """``value`` if ``setting`` takes it (the range the nodes hold their
    parameter to); else a :class:`SafemanipError` naming ``option``."""
    if value is not None and setting.problem(value):
        raise SafemanipError(f'{option} {value!r}: expected a finite number in {setting.bounds}')
    return value


def check_rate(option: str, value: float) -> float:
    """A frame rate the monitor takes (:data:`~safemanip_ros.settings.RATE_HZ`'s range)."""
    return check_setting(option, value, RATE_HZ)


def check_positive(option: str, value: float) -> float:
    return check_number(option, value, 0, None, low_open=True)


MAX_WAIT_S = 86400.0
"""The longest wait an operator command takes (a day); rclpy's waits
overflow on absurd ones (``--timeout-s 1e300`` never returned)."""


def check_wait(option: str, value: float, zero: bool = False) -> float:
    """A wait in seconds: in (0, MAX_WAIT_S] ([0, MAX_WAIT_S] with ``zero``)."""
    return check_number(option, value, 0, MAX_WAIT_S, low_open=not zero)


def check_probability(option: str, value: float) -> float:
    return check_number(option, value, 0, 1, low_open=True, high_open=True)


def add_suite_options(p: argparse.ArgumentParser, verb: str = 'monitor', scene: str | None = None,
                      strict: str | None = None, only: bool = True) -> None:
    """The options choosing what is monitored, for every command that
    takes them: ``--properties`` (repeatable), with ``scene`` (its help's
    end) ``--scene``, with ``strict`` (when it applies) ``--strict``, with
    ``only`` ``--only``."""
    from ..resources import default_suites
    p.add_argument('--properties', action='append', metavar='P.yaml',
                   help='property suite file(s), repeatable (default: '
                        + ', '.join(f.name for f in default_suites()) + ' as shipped)')
    if scene is not None:
        p.add_argument('--scene', metavar='SCENE.yaml', help='the entities present, binding templated properties'
                       + (f' ({scene})' if scene else ''))
    if strict is not None:
        p.add_argument('--strict', action='store_true',
                       help=f'{strict + ": " if strict else ""}a property reading a predicate the configuration does '
                            f'not ground is an error (default: it is left out and listed as unsupported)')
    if only:
        p.add_argument('--only', action='append', metavar='PROPERTY', help=f'{verb} only these properties (repeatable)')


def add_frame_options(p: argparse.ArgumentParser, rate_help: str | None = None, staleness: bool = True,
                      rate_default: bool = True) -> None:
    """``--rate-hz`` and ``--staleness-s``: how frames are built, with the
    live monitor's defaults and ranges (:mod:`safemanip_ros.settings`)."""
    p.add_argument(RATE_HZ.option, type=float, default=RATE_HZ.default if rate_default else None,
                   help=rate_help or RATE_HZ.help())
    if staleness:
        p.add_argument(STALENESS_S.option, type=float, default=STALENESS_S.default, help=STALENESS_S.help())


def check_frame_options(args: argparse.Namespace) -> None:
    """The values of :func:`add_frame_options`' options, in range."""
    check_rate(RATE_HZ.option, args.rate_hz)
    if hasattr(args, 'staleness_s'):
        check_setting(STALENESS_S.option, args.staleness_s, STALENESS_S)


def add_profile(p: argparse.ArgumentParser) -> None:
    """``--profile``: which semantics the properties are monitored with."""
    from ..resources import PROFILES
    p.add_argument('--profile', choices=PROFILES, default='default',
                   help='default: our corrected semantics; safemanip-compat: SafeManip\'s released monitor reproduced '
                        '(its suite config/properties/safemanip_compat.yaml: onset devices, timers, episode rules, '
                        'and its primary verdict in the results); not with --properties')


def profile_properties(args: argparse.Namespace) -> list[str]:
    """The suite files to monitor: ``--properties`` under the default
    profile (else its default suites), the profile's own suite otherwise."""
    from ..resources import profile_suites
    if args.profile != 'default':
        if args.properties:
            raise SafemanipError(f'--profile {args.profile} monitors its own suite '
                                 f'({profile_suites(args.profile)[0].name}); drop --properties (or name that file '
                                 f'with --properties and no --profile)')
        return [str(p) for p in profile_suites(args.profile)]
    return list(args.properties or [str(p) for p in profile_suites('default')])


def add_foxglove_options(p: argparse.ArgumentParser) -> None:
    """``--foxglove [HOST:]PORT`` and its credential and MCAP options (the
    commands that run a stack: ``run``, ``gate --live``)."""
    g = p.add_argument_group('Foxglove', 'a Foxglove WebSocket server beside the stack (docs/nodes.md, Foxglove)')
    g.add_argument('--foxglove', metavar='[HOST:]PORT',
                   help='serve verdicts, events, holds, the gate, TF and 3D markers to Foxglove on this address '
                        '(host default 127.0.0.1: this machine only)')
    g.add_argument('--operator-credential', metavar='FILE',
                   help='a file (one line, mode 600) whose credential a Foxglove connection presents to act: '
                        'acknowledge, resume, start or end a rollout (without it Foxglove is read-only)')
    g.add_argument('--foxglove-mcap', metavar='FILE.mcap',
                   help='also write what Foxglove is sent to this MCAP file (opens with the same layout)')


def foxglove_parameters(args: argparse.Namespace) -> dict[str, object]:
    """The Foxglove node's parameters from the options, checked now (a bad
    address or credential is one line before the stack starts); {} without
    ``--foxglove``."""
    if not getattr(args, 'foxglove', None):
        for option, value in (('--operator-credential', args.operator_credential),
                              ('--foxglove-mcap', args.foxglove_mcap)):
            if value:
                raise SafemanipError(f'{option} is for the Foxglove server: give --foxglove [HOST:]PORT too')
        return {}
    from ..foxglove.operator import load_credential
    from ..foxglove.server import parse_address
    address = parse_address(args.foxglove)
    if args.operator_credential:
        if os.environ.get('ROS_SECURITY_ENABLE', '').lower() == 'true':
            # The stack's and the gate's enclaves hold no operator call (config/security/policy.xml): the
            # server's calls would be refused by DDS after the operator logged in.
            raise SafemanipError('--operator-credential: under DDS security only the operator\'s enclave may '
                                 'acknowledge or resume; drop it here (Foxglove read-only) and run the operator\'s '
                                 'server apart: ros2 run safemanip_ros foxglove --ros-args --enclave '
                                 '/safemanip/operator -p address:=PORT -p operator_credential_file:=FILE')
        load_credential(args.operator_credential)
    if args.foxglove_mcap:
        new_file('--foxglove-mcap', args.foxglove_mcap)
    return {'address': f'{address.host}:{address.port}', 'operator_credential_file': args.operator_credential or '',
            'mcap_path': args.foxglove_mcap or ''}


def new_file(option: str, path: str | Path) -> Path:
    """``path``, a file that does not exist yet in a folder that can be
    written (made if need be); else a :class:`SafemanipError` naming ``option``."""
    out = Path(path)
    if out.exists():
        raise SafemanipError(f'{option} {out}: exists; name a new file')
    writable_folder(option, out.parent)
    return out


def writable_folder(option: str, path: str | Path) -> Path:
    """``path`` made (with its parents) if need be and proven writable by
    creating a file in it; else a :class:`SafemanipError` naming ``option``."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise SafemanipError(f'{option} {folder}: exists and is not a folder')
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise SafemanipError(f'{option} {folder}: cannot write there ({err.strerror or err})') from None
    return folder
