"""Static gates, as rosbags and ROS 2 packages run them: ruff over the
repository (errors, unused names, import order; configuration in
pyproject.toml) and mypy --strict over every package of safemanip_ros."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

BIN = Path(sys.executable).parent


def test_ruff():
    proc = subprocess.run([str(BIN / 'ruff'), 'check', 'safemanip_ros', 'test', 'bench', 'tools'], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_mypy_strict_on_every_package():
    # mypy's incremental cache, kept in the virtual environment (outside the
    # source tree, set up once like the venv itself): a module is checked again
    # when its content or an interface it depends on changed, and a module with
    # errors is never cached, so an error is reported on every run.
    cache = Path(sys.prefix) / 'mypy_cache'
    proc = subprocess.run([sys.executable, '-m', 'mypy', '--cache-dir', str(cache)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert 'Success' in proc.stdout
