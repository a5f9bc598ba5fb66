"""rosbags at both ends of the supported range.

The requirements pin ``rosbags>=OLDEST,<BEFORE``
(:mod:`safemanip_ros.bag.compat`); the venv has the newest release of that
range, and set-up installs OLDEST into ``.venv/rosbags-oldest``.  The bag
tests run here once more with OLDEST put first on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from safemanip_ros.bag import compat

OLDEST_DIR = Path(sys.prefix) / 'rosbags-oldest'


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split('.')[:3])


def test_the_pins_say_the_same_range():
    pin = f'rosbags>={compat.OLDEST},<{compat.BEFORE}'
    assert pin in (REPO / 'requirements' / 'dev.txt').read_text()
    assert f"'{pin}'" in (REPO / 'setup.py').read_text()


def test_installed_rosbags_is_in_range_and_has_what_we_reuse():
    version = _version_tuple(compat.rosbags_version())
    assert _version_tuple(compat.OLDEST) <= version < _version_tuple(compat.BEFORE)
    assert compat.bulk_readable()
    compat.tune_rosbags()          # both patches apply to this release
    from rosbags.rosbag2 import reader
    assert getattr(reader.YAML, 'json_first', False) and getattr(reader.parse_qos, 'shared', False)


@pytest.mark.slow
def test_bag_tests_pass_with_the_oldest_supported_rosbags():
    assert (OLDEST_DIR / 'rosbags').is_dir(), f'{OLDEST_DIR} is missing: run tools/setup_env.sh'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(OLDEST_DIR), os.environ.get('PYTHONPATH', '')]))
    probe = subprocess.run([sys.executable, '-c', 'from safemanip_ros.bag import compat; '
                            'print(compat.rosbags_version(), compat.bulk_readable())'],
                           capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert probe.stdout.split() == [compat.OLDEST, 'True'], probe.stdout + probe.stderr
    # Not the DDS round trip (rclpy's bytes against our layouts: no rosbags in it), which would share
    # this worker's ROS domain.
    proc = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-m', 'not ros',
                           'test/test_bag_bulk.py', 'test/test_bag_columns.py', 'test/test_bag_layouts.py'],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert ' passed' in proc.stdout and ' failed' not in proc.stdout
