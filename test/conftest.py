"""Shared test set-up.

DDS traffic stays on this machine (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)
and each test session uses its own ROS domain so parallel runs do not see
each other's topics.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(random.SystemRandom().randint(1, 100)))

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)


@pytest.fixture(scope='session')
def repo() -> Path:
    return REPO


def run_cli(*args: str, input: str | None = None, timeout: float = 120, cwd: Path | None = None
            ) -> subprocess.CompletedProcess:
    """Run the installed ``safemanip`` command."""
    exe = shutil.which('safemanip', path=str(Path(sys.executable).parent)) or 'safemanip'
    return subprocess.run([exe, *args], capture_output=True, text=True, input=input, timeout=timeout,
                          cwd=cwd)
