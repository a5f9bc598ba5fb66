"""``safemanip run`` records in a process of its own (real processes, real
DDS, real bags): a stack killed with SIGKILL still leaves its bag closed with
every split listed (the recorder is told by the kernel), and a recorder
that dies is said at once while the stack keeps monitoring, the run then
exiting 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from rosbags.rosbag2 import Reader

SAFEMANIP = str(Path(sys.executable).parent / 'safemanip')
CONFIG = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')
pytestmark = pytest.mark.ros


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path, int]:
    log = tmp_path / 'stack.log'
    proc = subprocess.Popen([SAFEMANIP, 'run', '--config', CONFIG, '--only', 'no_forbidden_contact', '--no-camera',
                             '--no-supervisor', '--bag', str(tmp_path / 'bag')],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    end = time.monotonic() + 90
    while 'nodes up' not in log.read_text():
        assert proc.poll() is None and time.monotonic() < end, log.read_text()
        time.sleep(0.1)
    children = [int(c) for c in Path(f'/proc/{proc.pid}/task/{proc.pid}/children').read_text().split()]
    assert len(children) == 1, children
    return proc, log, children[0]


def _listed(bag: Path, topic: str) -> int:
    try:
        info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return 0
    return sum(int(t['message_count']) for t in info.get('topics_with_message_count') or []
               if t['topic_metadata']['name'] == topic)


def _state(pid: int, bag: Path) -> str:
    """What a process is doing, for a failure's message: its threads' states and kernel wait channels, and
    the bag folder's files (its output went to the killed stack)."""
    threads = []
    for task in sorted(Path(f'/proc/{pid}/task').glob('*')):
        try:
            name = (task / 'comm').read_text().strip()
            state = (task / 'stat').read_text().rsplit(')', 1)[1].split()[0]
            threads.append(f'{name}:{state}:{(task / "wchan").read_text().strip()}')
        except OSError:
            continue
    files = sorted(f'{p.name}({p.stat().st_size})' for p in bag.iterdir()) if bag.is_dir() else []
    return f'threads {threads}; bag {files}'


def _ended(pid: int) -> bool:
    """Gone, or a zombie nobody reaps (a container's first process may not)."""
    try:
        return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def test_a_stack_killed_with_sigkill_still_closes_its_bag(tmp_path):
    bag = tmp_path / 'bag'
    proc, log, recorder = _start(tmp_path)
    try:
        deadline = time.monotonic() + 60      # the monitor's status, once a second, listed in two splits
        while _listed(bag, '/status') < 2:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        listed = _listed(bag, '/status')
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60
        while not _ended(recorder):
            assert time.monotonic() < deadline, f'the recorder outlived its stack: {_state(recorder, bag)}'
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    on_disk = sorted(p.name for p in bag.iterdir() if p.suffix == '.mcap')
    assert sorted(info['relative_file_paths']) == on_disk and not (bag / '.open').exists()
    with Reader(bag) as r:
        status = [t for c, t, _ in r.messages() if c.topic == '/status']
    assert len(status) >= listed and status == sorted(status)


def test_a_recorder_that_dies_is_said_and_the_stack_goes_on(tmp_path):
    proc, log, recorder = _start(tmp_path)
    try:
        os.kill(recorder, signal.SIGKILL)
        deadline = time.monotonic() + 60
        line = 'safemanip run: error: the recorder process ended (exit -9); monitoring goes on without recording'
        while line not in log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, log.read_text()     # the stack still runs
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 1, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert 'Traceback' not in log.read_text()
