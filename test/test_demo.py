"""The README's main-job command runs end to end and passes its own checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_make_demo():
    proc = subprocess.run(['make', '-s', 'demo'], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert 'published over Fast DDS between two rclpy nodes' in out
    assert 'all injected violations caught at their frame, no false alarms' in out
    assert out.count(' ok\n') == 15 and 'FALSE ALARM' not in out and 'MISSED' not in out


def test_demo_offline_gives_the_same_table():
    from conftest import run_cli
    proc = run_cli('demo', '--offline')
    assert proc.returncode == 0, proc.stderr
    assert '(offline)' in proc.stdout and proc.stdout.count(' ok\n') == 15
