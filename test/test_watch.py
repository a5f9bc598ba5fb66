"""`safemanip watch --once` shows what the monitor and supervisor publish."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import wait_for
from ros_helpers import RELIABLE, ros_node

from safemanip_ros.msg import SupervisorAction, Verdict, VerdictArray, ViolationEvent

pytestmark = pytest.mark.ros


@pytest.mark.slow
def test_watch_once_snapshot():
    proc = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), 'watch', '--once', '--timeout-s', '30'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with ros_node('watch_test') as (node, _):
            vp = node.create_publisher(VerdictArray, 'verdicts', RELIABLE)
            ep = node.create_publisher(ViolationEvent, 'violations', RELIABLE)
            ap = node.create_publisher(SupervisorAction, 'supervisor_actions', RELIABLE)
            # Every publisher must be matched, or a volatile message can be lost.
            assert wait_for(lambda: min(p.get_subscription_count() for p in (vp, ep, ap)) > 0, 30.0)
            ep.publish(ViolationEvent(event=0, instance='grasp_remains_synced_until_dropped[object=mug]',
                                      start_frame=45, end_frame=45))
            ap.publish(SupervisorAction(action=SupervisorAction.ACTION_PAUSE, reason='violation of grasp',
                                        success=True))
            time.sleep(0.2)
            vp.publish(VerdictArray(frame=46, verdicts=[
                Verdict(instance='grasp_remains_synced_until_dropped[object=mug]', verdict=0, mode=1),
                Verdict(instance='no_forbidden_contact', verdict=3, mode=0)]))
            out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[1].startswith('!!grasp_remains_synced_until_dropped[object=mug]') and 'VIOLATED' in lines[1]
    assert 'no_forbidden_contact' in lines[2] and 'presumably true' in lines[2]
    assert any('opened' in ln and 'frame     45' in ln for ln in lines)
    assert any(ln.strip().startswith('PAUSE') and 'violation of grasp' in ln for ln in lines)


@pytest.mark.slow
def test_watch_once_times_out_clearly():
    proc = subprocess.run([str(Path(sys.executable).parent / 'safemanip'), 'watch', '--once', '--timeout-s', '1'],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and 'no verdicts on /verdicts within 1.0 s' in proc.stderr


def test_the_board_merges_changed_verdicts_into_the_full_set():
    """The monitor lists every instance now and then, the changed ones between:
    the table is their merge, and a new rollout starts it afresh."""
    from safemanip_ros.cli.watch import VerdictBoard
    board = VerdictBoard()
    board.update(VerdictArray(episode_id='e1', frame=0, verdicts=[Verdict(instance='a', verdict=3),
                                                                  Verdict(instance='b', verdict=3)]))
    board.update(VerdictArray(episode_id='e1', frame=1, verdicts=[Verdict(instance='b', verdict=0, mode=1)]))
    board.update(VerdictArray(episode_id='e1', frame=2, verdicts=[]))
    assert len(board) == 2 and board.by_instance['a'].verdict == 3 and board.by_instance['b'].mode == 1
    board.update(VerdictArray(episode_id='e2', frame=0, verdicts=[Verdict(instance='a', verdict=1)]))
    assert list(board.by_instance) == ['a'] and board.by_instance['a'].verdict == 1


def test_topic_text_cannot_drive_the_terminal():
    """Anyone who can publish could clear or fake the operator's screen: every
    string from a topic is shown escaped."""
    from safemanip_ros.cli.watch import VerdictBoard, render
    from safemanip_ros.msg import MonitorStatus
    board = VerdictBoard()
    board.update(VerdictArray(episode_id='e\x1b[2J', verdicts=[Verdict(instance='p\x1b[31mfake', verdict=0, mode=1)]))
    status = MonitorStatus(episode_id='e\x1b[2J', unknown_predicates=['x\x07'], instances=1)
    text = render(board, status, [ViolationEvent(instance='q\r\x1b[Kok')],
                  [SupervisorAction(reason='held\x1b]0;title\x07\u202e', success=True)])
    assert not any(ord(c) < 32 and c != '\n' or 0x7f <= ord(c) < 0xa0 or c == '\u202e' for c in text), repr(text)
    assert 'p\\x1b[31mfake' in text and 'q\\r\\x1b[Kok' in text and 'held\\x1b]0;title\\x07\\u202e' in text
    assert 'rollout e\\x1b[2J' in text and 'x\\x07' in text
