"""Checks of command-line options: a number out of range, or an output
folder that cannot be made or written, is a one-line error naming the
option, never a silent misbehaviour (``--staleness-s nan`` once made every
predicate unknown) or an internal error (``--out /proc/x``)."""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from ..errors import SafemanipError


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


MAX_RATE_HZ = 1000.0
"""The highest frame rate accepted (a monitor frame per millisecond); above it
a long recording would ask for memory no machine has (1e9 Hz: 37 GiB)."""


def check_rate(option: str, value: float) -> float:
    """A frame rate in (0, MAX_RATE_HZ] Hz."""
    return check_number(option, value, 0, MAX_RATE_HZ, low_open=True)


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
