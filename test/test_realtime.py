"""``safemanip run --realtime``: the control path under SCHED_FIFO where the
machine permits it (the DDS and executor threads inherit it; the recorder,
a process of its own, keeps normal scheduling), one warning and a running stack where it
does not, and bad priorities refused with one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from safemanip_ros.realtime import thread_policies

SAFEMANIP = str(Path(sys.executable).parent / 'safemanip')
CONFIG = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')


def _fifo_permitted() -> bool:
    probe = subprocess.run([sys.executable, '-c', 'import os; os.sched_setscheduler(0, os.SCHED_FIFO, '
                            'os.sched_param(1))'], capture_output=True)
    return probe.returncode == 0


def _start(tmp_path: Path, *prefix: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / 'stack.log'
    proc = subprocess.Popen([*prefix, SAFEMANIP, 'run', '--config', CONFIG, '--only', 'no_forbidden_contact',
                             '--no-camera', '--bag', str(tmp_path / 'bag'), '--realtime', '20'],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    end = time.monotonic() + 90
    while 'nodes up' not in log.read_text():
        assert proc.poll() is None and time.monotonic() < end, log.read_text()
        time.sleep(0.1)
    return proc, log


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.skipif(not _fifo_permitted(), reason='this machine does not permit SCHED_FIFO; the fallback test '
                                                  'below covers it')
def test_the_control_path_runs_fifo_and_the_bag_writer_does_not(tmp_path):
    proc, log = _start(tmp_path)
    try:
        threads = thread_policies(proc.pid)
        main = next(v for k, v in threads.items() if k.endswith(f':{proc.pid}'))
        assert main == (os.SCHED_FIFO, 20), threads
        # The recorder is a process of its own, started before --realtime took effect: every thread of it,
        # the bag writer's among them, runs under normal scheduling.
        children = [int(c) for c in Path(f'/proc/{proc.pid}/task/{proc.pid}/children').read_text().split()]
        assert len(children) == 1, children
        recorder = thread_policies(children[0])
        assert len(recorder) >= 3 and all(policy == os.SCHED_OTHER for policy, _ in recorder.values()), recorder
        # Every thread ROS started inherited it: Fast DDS's (named dds.*) and our executors' and the
        # supervisor's (Python threads, named after the process). A thread started at import time, before
        # --realtime took effect (OpenBLAS's worker), keeps normal scheduling: it is not on the control path.
        dds = [v for k, v in threads.items() if k.startswith('dds.')]
        assert len(dds) >= 3 and all(v == (os.SCHED_FIFO, 20) for v in dds), threads
        ours = [v for k, v in threads.items() if k.startswith('safemanip:')]
        assert sum(v == (os.SCHED_FIFO, 20) for v in ours) >= 4, threads
        assert 'SCHED_FIFO priority 20, memory locked' in log.read_text()
    finally:
        _stop(proc)
    assert proc.returncode == 0, log.read_text()


@pytest.mark.skipif(shutil.which('setpriv') is None, reason='needs setpriv (util-linux) to drop CAP_SYS_NICE')
def test_without_permission_one_warning_and_the_stack_still_runs(tmp_path):
    # As an unprivileged user: no CAP_SYS_NICE, no rtprio limit.
    proc, log = _start(tmp_path, 'setpriv', '--inh-caps', '-sys_nice,-ipc_lock', '--bounding-set',
                       '-sys_nice,-ipc_lock', 'prlimit', '--rtprio=0', '--memlock=65536', '--')
    try:
        threads = thread_policies(proc.pid)
        assert all(policy == os.SCHED_OTHER for policy, _ in threads.values()), threads
    finally:
        _stop(proc)
    text = log.read_text()
    warnings = [line for line in text.splitlines() if 'safemanip run: warning: real-time (--realtime):' in line]
    assert any('SCHED_FIFO priority 20 not permitted' in w and 'CAP_SYS_NICE' in w for w in warnings), text
    assert 'Traceback' not in text and proc.returncode == 0, text


def test_a_bad_priority_is_one_line_exit_2(tmp_path):
    for value in ('0', '99'):
        proc = run_cli('run', '--config', CONFIG, '--realtime', value)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
            f'safemanip: error: --realtime: real-time priority {value}: expected 1 to 98'], proc.stderr
    proc = run_cli('run', '--config', CONFIG, '--realtime', 'x')       # argparse's usage, then its one line
    assert proc.returncode == 2 and "argument --realtime: invalid int value: 'x'" in proc.stderr.splitlines()[-1]
    env = dict(os.environ, SAFEMANIP_REALTIME_PRIORITY='high')
    proc = subprocess.run([str(Path(sys.executable).parent / 'monitor')], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 2 and "SAFEMANIP_REALTIME_PRIORITY='high'" in proc.stderr, proc.stderr


def test_settling_the_heap_takes_live_objects_out_of_the_collectors_passes():
    """What the stack made at bring-up is frozen (gc.freeze): a full pass of
    the cyclic collector no longer traverses it, reference counting still
    frees a frozen object that is dropped, and settling again (a reload)
    collects a frozen cycle that was dropped meanwhile."""
    import gc
    import weakref

    from safemanip_ros.realtime import settle_heap

    class Made:
        pass

    kept = [Made() for _ in range(1000)]
    dropped = Made()
    gone = weakref.ref(dropped)
    replaced = Made()                  # a monitor a reload replaces, caught in a reference cycle
    replaced.me = replaced
    replaced_gone = weakref.ref(replaced)
    try:
        settle_heap()
        assert gc.get_freeze_count() >= len(kept)
        del dropped
        assert gone() is None
        del replaced
        assert replaced_gone() is not None      # frozen: no pass looks at the cycle
        settle_heap()                           # the next rebuild's settling thaws and collects it
        assert replaced_gone() is None
    finally:
        gc.unfreeze()
