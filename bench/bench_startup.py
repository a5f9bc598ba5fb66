"""CPU cost of starting a Python process of ours, with the package's
bytecode cache (``__pycache__``) against without it.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's environment sets
it), nothing writes the cache, and every process compiled each module of
the package it imports from source; ``make demo`` and ``make test`` now
unset it.  Both ways import the same copy of ``safemanip_ros`` (one copy
without a cache, one compiled ahead), interleaved, in fresh interpreters:

* the command line (``safemanip_ros.cli.main``, what every ``safemanip``
  command imports first);
* the live stack (``safemanip run``'s nodes: grounding, monitor,
  supervisor, recorder).

    python bench/bench_startup.py            # 10 processes each way
    python bench/bench_startup.py --quick    # 1
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORTS = {
    'command line': 'import safemanip_ros.cli.main',
    'live stack': ('import safemanip_ros.cli.run, safemanip_ros.nodes.monitor_node, '
                   'safemanip_ros.nodes.grounding_nodes, safemanip_ros.nodes.supervisor_node, '
                   'safemanip_ros.nodes.recorder_node'),
}


def _cpu_s(code: str, package_root: Path) -> float:
    """CPU seconds (user + system) of a fresh interpreter running ``code``
    with the copy under ``package_root`` (its current folder: ``-c`` puts that
    first on the path)."""
    env = dict(os.environ, PYTHONPATH=str(package_root), PYTHONDONTWRITEBYTECODE='1')
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, '-c', f'{code}; import safemanip_ros; '
                    f'assert safemanip_ros.__file__.startswith({str(package_root)!r})'], env=env, cwd=package_root,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--runs', type=int, default=10, help='fresh interpreters each way (10)')
    ap.add_argument('--quick', dest='runs', action='store_const', const=1, help='one each way (smoke test)')
    runs = ap.parse_args().runs
    with tempfile.TemporaryDirectory(prefix='bench_startup-') as tmp:
        ignore = shutil.ignore_patterns('__pycache__')
        cold, warm = Path(tmp) / 'cold', Path(tmp) / 'warm'
        for root in (cold, warm):
            shutil.copytree(REPO / 'safemanip_ros', root / 'safemanip_ros', ignore=ignore)
            (root / 'config').symlink_to(REPO / 'config')         # the copy's resources: the source tree's
            (root / 'package.xml').symlink_to(REPO / 'package.xml')
        compileall.compile_dir(warm / 'safemanip_ros', quiet=1)
        print(f'== bench_startup: fresh interpreters importing safemanip_ros, median CPU of {runs} each way '
              f'(interleaved)')
        for label, code in IMPORTS.items():
            times: dict[str, list[float]] = {'without': [], 'with': []}
            for _ in range(runs):
                times['without'].append(_cpu_s(code, cold))
                times['with'].append(_cpu_s(code, warm))
            without, with_ = statistics.median(times['without']), statistics.median(times['with'])
            print(f'{label}: {with_:.3f} s with the bytecode cache, {without:.3f} s without it (before): '
                  f'{without / with_:.2f}x, {without - with_:.3f} s saved per process')
    return 0


if __name__ == '__main__':
    sys.exit(main())
