"""Recording: split bags written by rosbags are read back exactly (MCAP and
SQLite3); the threaded recorder never blocks its caller and lists every
split when closed; a recorder stopped with SIGINT in the middle of rotations
lists every split, and one killed with SIGKILL leaves a readable bag that
misses at most the last second."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node, spin_until
from rosbags.rosbag2 import Reader

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import BagWriteError, SplitBagWriter
from safemanip_ros.msg import PredicateArray
from safemanip_ros.nodes.conversions import predicate_array, predicate_values

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_split_bag_round_trip(tmp_path, storage):
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(tmp_path / 'bag', storage, split_s=1.0, custom_data={'suite': 'safemanip'})
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    sent = []
    for i in range(45):   # 4.5 s at 10 Hz → 5 splits
        m = Arr(header=Header(stamp=Time(sec=i, nanosec=0), frame_id=''), seq=i,
                predicates=[Pred(name='a', value=bool(i % 2), unknown=i % 7 == 0, source='t',
                                 data_stamp=Time(sec=i, nanosec=0))])
        w.write('/predicates', 1_000_000_000 + i * 100_000_000, ts.serialize_cdr(m, 'safemanip_ros/msg/PredicateArray'))
        sent.append(m)
    w.close()
    assert sorted(p.suffix for p in (tmp_path / 'bag').iterdir()
                  if p.name != 'metadata.yaml' and not p.name.startswith('.')) == \
        ['.' + ('mcap' if storage == 'mcap' else 'db3')] * 5
    with Reader(tmp_path / 'bag') as r:
        got = [ts.deserialize_cdr(raw, c.msgtype) for c, _, raw in r.messages()]
        assert r.message_count == 45 and [c.topic for c in r.connections] == ['/predicates'] * len(r.connections)
    assert [(g.seq, g.predicates[0].value, g.predicates[0].unknown) for g in got] == \
        [(m.seq, m.predicates[0].value, m.predicates[0].unknown) for m in sent]
    import yaml
    info = yaml.safe_load((tmp_path / 'bag' / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert info['custom_data'] == {'suite': 'safemanip'} and len(info['relative_file_paths']) == 5
    with pytest.raises(BagWriteError, match='already exists'):
        SplitBagWriter(tmp_path / 'bag')


def test_threaded_recorder_never_blocks_and_counts_drops(tmp_path):
    from safemanip_ros.bag.recorder import ThreadedRecorder
    ts = typestore()
    raw = ts.serialize_cdr(ts.types['std_msgs/msg/String'](data='x' * 100), 'std_msgs/msg/String')
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=0.05)
    w.add_topic('/s', 'std_msgs/msg/String')
    rec = ThreadedRecorder(w, queue_size=50)          # not started: nothing drains the queue
    accepted = [rec.put('/s', 10**9 + i * 10**7, raw) for i in range(80)]
    assert accepted == [True] * 50 + [False] * 30 and rec.stats.dropped == 30
    stats = rec.close()                               # drains what was queued and closes the bag
    assert stats.written == 50
    with Reader(tmp_path / 'bag') as r:
        assert r.message_count == 50
    assert len(list((tmp_path / 'bag').glob('*.mcap'))) > 1

    class _ThreadNotingWriter(SplitBagWriter):
        """The real writer, noting which threads write (and so rotate splits)."""

        threads: set = set()

        def write(self, *args, **kwargs):
            self.threads.add(threading.get_ident())
            return super().write(*args, **kwargs)

    w2 = _ThreadNotingWriter(tmp_path / 'bag2', 'mcap', split_s=0.05)
    w2.add_topic('/s', 'std_msgs/msg/String')
    rec2 = ThreadedRecorder(w2, queue_size=100000).start()
    for i in range(2000):                             # 20 s of bag time in 0.05 s splits: 400 rotations
        assert rec2.put('/s', 10**9 + i * 10**7, raw)
    stats = rec2.close()
    assert stats.written == 2000 and stats.dropped == 0 and stats.errors == 0
    with Reader(tmp_path / 'bag2') as r:
        assert r.message_count == 2000
    assert len(list((tmp_path / 'bag2').glob('*.mcap'))) >= 300
    # The caller paid for none of the writes or split rotations: all ran on the recorder's own thread.
    assert len(w2.threads) == 1 and threading.get_ident() not in w2.threads


class _RecorderProcess:
    """The ``recorder`` executable recording into ``bag``, and a publisher of
    ``predicates`` matched to it."""

    def __init__(self, tmp_path: Path, bag: Path, *params: str) -> None:
        args = [str(Path(sys.executable).parent / 'recorder'), '--ros-args', '-p', f'bag_path:={bag}',
                '-p', 'autostart:=true']
        for p in params:
            args += ['-p', p]
        self.log = tmp_path / 'log'
        self.proc = subprocess.Popen(args, stdout=open(self.log, 'w'), stderr=subprocess.STDOUT)
        self._ros = contextlib.ExitStack()
        self.node, _ = self._ros.enter_context(ros_node('recording_test'))
        self.pub = self.node.create_publisher(PredicateArray, 'predicates', RELIABLE)
        deadline = time.monotonic() + 30
        while self.pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.pub.get_subscription_count() > 0, self.log.read_text()

    def close(self) -> None:
        self._ros.close()
        if self.proc.poll() is None:
            self.proc.kill()


@pytest.mark.ros
def test_sigint_during_rotations_lists_every_split(tmp_path):
    bag = tmp_path / 'bag'
    rec = _RecorderProcess(tmp_path, bag, 'split_s:=0.1')
    proc, pub = rec.proc, rec.pub
    try:
        for i in range(60):                           # 3 s at 20 Hz: about 30 rotations
            pub.publish(predicate_array({'a': i % 2 == 0}, time.time_ns(), 'test', seq=i))
            time.sleep(0.05)
        pub.wait_for_all_acked(rclpy.duration.Duration(seconds=5))
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0, rec.log.read_text()
    finally:
        rec.close()
    import yaml
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    on_disk = sorted(p.name for p in bag.iterdir() if p.suffix == '.mcap')
    assert sorted(info['relative_file_paths']) == on_disk and len(on_disk) > 10
    assert not (bag / '.open').exists()
    ts = typestore()
    with Reader(bag) as r:
        seqs = [ts.deserialize_cdr(raw, c.msgtype).seq for c, _, raw in r.messages() if c.topic == '/predicates']
    assert seqs == list(range(60))                    # nothing lost on SIGINT


@pytest.mark.ros
def test_sigterm_closes_the_bag_with_everything_sent(tmp_path):
    bag = tmp_path / 'bag'
    rec = _RecorderProcess(tmp_path, bag)
    proc, pub = rec.proc, rec.pub
    try:
        for i in range(90):                           # a burst, within the subscription's depth of 100
            pub.publish(predicate_array({'a': i % 2 == 0}, time.time_ns(), 'test', seq=i))
        assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10))
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, rec.log.read_text()
    finally:
        rec.close()
    assert not (bag / '.open').exists()
    ts = typestore()
    with Reader(bag) as r:
        seqs = [ts.deserialize_cdr(raw, c.msgtype).seq for c, _, raw in r.messages() if c.topic == '/predicates']
    assert seqs == list(range(90)), rec.log.read_text()


@pytest.mark.ros
def test_a_burst_of_violation_events_is_recorded_whole(tmp_path):
    """A frame can open or close one violation per instance: 600 events
    published at once, with the monitor's QoS, all reach the bag (with the
    events' depth of 100 the recorder lost part of such a burst)."""
    from safemanip_ros.msg import ViolationEvent
    from safemanip_ros.nodes.qos import EVENTS
    bag = tmp_path / 'bag'
    rec = _RecorderProcess(tmp_path, bag)
    proc = rec.proc
    try:
        pub = rec.node.create_publisher(ViolationEvent, 'violations', EVENTS)
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        # Acknowledged once the recorder's reader has matched this writer too (discovery runs both ways):
        # before that, a reader drops what it receives and replays only the writer's last 100.
        pub.publish(ViolationEvent(instance='first', count=0))
        assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=30))
        for i in range(600):
            pub.publish(ViolationEvent(instance=f'p[{i}]', count=i + 1))
        assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=20))
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0, rec.log.read_text()
    finally:
        rec.close()
    ts = typestore()
    with Reader(bag) as r:
        counts = [ts.deserialize_cdr(raw, c.msgtype).count for c, _, raw in r.messages() if c.topic == '/violations']
    assert counts == list(range(601)), (len(counts), rec.log.read_text())


@pytest.mark.ros
def test_closing_the_bag_takes_what_was_delivered_and_not_yet_spun(tmp_path):
    """Messages the recorder's reader has acknowledged but its executor has
    not taken (it takes one per wake-up; here it never runs) are written when
    the bag is closed: the events of a run's last moments, before Ctrl-C."""
    from safemanip_ros.nodes.recorder_node import RecorderNode
    rclpy.init(args=['--ros-args', '-p', f'bag_path:={tmp_path / "bag"}'])
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        recorder = RecorderNode()
        recorder.trigger_configure()
        recorder.trigger_activate()
        node = rclpy.create_node('burst', context=ctx)
        pub = node.create_publisher(PredicateArray, 'predicates', RELIABLE)
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(90):
            pub.publish(predicate_array({'a': i % 2 == 0}, time.time_ns(), 'test', seq=i))
        assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10))
        recorder.close_bag()
        node.destroy_node()
        recorder.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
        rclpy.try_shutdown()
    ts = typestore()
    with Reader(tmp_path / 'bag') as r:
        seqs = [ts.deserialize_cdr(raw, c.msgtype).seq for c, _, raw in r.messages() if c.topic == '/predicates']
    assert seqs == list(range(90))


@pytest.mark.ros
def test_sigkill_loses_at_most_the_last_second(tmp_path):
    """Killed at any moment, the recorder loses at most its open split
    (``split_s``, 0.75 s here by default): every message it had listed in
    metadata.yaml before the kill reads back, as an exact prefix.  The kill
    comes once the recorder has listed what was sent over a second before the
    last message (a condition waited for, not a wall-clock guess: a busy
    machine delays the recorder's thread, and the claim is about its splits)."""
    bag = tmp_path / 'bag'
    rec = _RecorderProcess(tmp_path, bag, 'suite:=safemanip')
    proc, pub = rec.proc, rec.pub
    try:
        for i in range(70):              # 3.5 s at 20 Hz
            pub.publish(predicate_array({'a': i % 2 == 0}, time.time_ns(), 'test', seq=i))
            time.sleep(0.05)
        older_than_a_second = 70 - 20
        deadline = time.monotonic() + 60
        listed = 0
        while time.monotonic() < deadline and listed < older_than_a_second:
            listed = _listed_messages(bag, '/predicates')
            time.sleep(0.02)
        assert listed >= older_than_a_second, listed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        rec.close()
    ts = typestore()
    with Reader(bag) as r:
        seqs = [ts.deserialize_cdr(raw, c.msgtype).seq for c, _, raw in r.messages() if c.topic == '/predicates']
    assert seqs == list(range(len(seqs)))                  # an exact prefix, in order
    assert len(seqs) >= listed                             # nothing listed before the kill is lost


def _listed_messages(bag: Path, topic: str) -> int:
    """Messages of ``topic`` the bag's metadata.yaml lists now (0 while unreadable)."""
    from safemanip_ros.bag.compat import load_metadata
    try:
        info = load_metadata((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return sum(int(t.get('message_count', 0)) for t in info.get('topics_with_message_count') or []
               if t.get('topic_metadata', {}).get('name') == topic)


@pytest.mark.ros
def test_bag_player_replays_a_recording(tmp_path):
    """It plays every topic, waits only for topics something subscribes to (a topic nobody listens to
    held it for good), publishes /clock with bag time when asked, and says its parameters on --help."""
    from rosgraph_msgs.msg import Clock
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(tmp_path / 'bag', 'mcap')
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    w.add_topic('/nobody_listens', 'safemanip_ros/msg/PredicateArray')
    for i in range(20):
        m = Arr(header=Header(stamp=Time(sec=i, nanosec=0), frame_id=''), seq=i,
                predicates=[Pred(name='a', value=bool(i % 2), unknown=False, source='t',
                                 data_stamp=Time(sec=i, nanosec=0))])
        raw = ts.serialize_cdr(m, 'safemanip_ros/msg/PredicateArray')
        w.write('/predicates', 10**9 + i * 50_000_000, raw)
        w.write('/nobody_listens', 10**9 + i * 50_000_000 + 1, raw)
    w.close()
    got, clock = [], []
    with ros_node('replay_test') as (node, ex):
        node.create_subscription(PredicateArray, 'predicates',
                                 lambda m: got.append(predicate_values(m) | {'seq': m.seq}), RELIABLE)
        node.create_subscription(Clock, '/clock', lambda m: clock.append(m.clock.sec * 10**9 + m.clock.nanosec), 10)
        proc = subprocess.Popen([str(Path(sys.executable).parent / 'bag_player'), '--ros-args', '-p',
                                 f'bag:={tmp_path / "bag"}', '-p', 'wait_for_subscribers:=2', '-p', 'rate:=2.0',
                                 '-p', 'clock:=true', '-p', 'wait_timeout_s:=10.0'],
                                stdout=open(tmp_path / 'log', 'w'), stderr=subprocess.STDOUT)
        assert spin_until(ex, lambda: len(got) >= 20, 60), (tmp_path / 'log').read_text()
        assert proc.wait(timeout=30) == 0
    assert got == [{'a': bool(i % 2), 'seq': i} for i in range(20)]
    log = (tmp_path / 'log').read_text()
    # One subscriber of two on /predicates: named while waiting, then played past the limit; never /nobody_listens.
    assert 'waiting for subscribers on: /predicates (1 of 2)' in log and 'nobody_listens' not in log, log
    # (10 s: the player must first discover this node's subscription; on a loaded machine DDS discovery
    # took over 3 s, and a player that has found no subscriber at all plays to nobody.)
    assert 'playing after 10 s without the subscribers waited for on: /predicates (1 of 2)' in log, log
    assert clock and clock == sorted(clock) and 10**9 <= clock[0] and clock[-1] <= 10**9 + 19 * 50_000_000 + 1
    bad = subprocess.run([str(Path(sys.executable).parent / 'bag_player'), '--ros-args', '-p',
                          f'bag:={tmp_path / "nope"}'], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and 'nope: cannot open bag' in bad.stderr
    helped = subprocess.run([str(Path(sys.executable).parent / 'bag_player'), '--help'], capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0 and 'wait_for_subscribers (int, 0)' in helped.stdout and 'clock (bool' in \
        helped.stdout


def _stale_metadata_bag(path: Path) -> int:
    """A bag as a kill between moving splits in and rewriting metadata.yaml
    leaves it: 5 splits on disk, metadata.yaml listing the first 3."""
    ts = typestore()
    Arr, Pred = ts.types['safemanip_ros/msg/PredicateArray'], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    w = SplitBagWriter(path, 'mcap', split_s=1.0)
    w.add_topic('/predicates', 'safemanip_ros/msg/PredicateArray')
    for i in range(100):                  # 5 s at 20 Hz: 5 splits
        stamp = Time(sec=100 + i // 20, nanosec=(i % 20) * 50_000_000)
        m = Arr(header=Header(stamp=stamp, frame_id=''), seq=i,
                predicates=[Pred(name='reach_in_microwave', value=False, unknown=False, source='t', data_stamp=stamp),
                            Pred(name='fixture_fully_open_microwave', value=False, unknown=False, source='t',
                                 data_stamp=stamp)])
        w.write('/predicates', 100 * 10**9 + i * 50_000_000, ts.serialize_cdr(m, 'safemanip_ros/msg/PredicateArray'))
    w.close()
    # metadata.yaml as it was after 3 splits (the index lines are there for all 5).
    import yaml

    from safemanip_ros.bag.writer import write_metadata
    info = yaml.safe_load((path / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    kept = info['files'][:3]
    info['files'], info['relative_file_paths'] = kept, [f['path'] for f in kept]
    info['message_count'] = sum(f['message_count'] for f in kept)
    for t in info['topics_with_message_count']:
        t['message_count'] = info['message_count']
    write_metadata(path, info)
    (path / '.open' / 'split_5').mkdir(parents=True)
    (path / '.open' / 'split_5' / 'split_5_0.mcap').write_bytes(b'\x89MCAP0\r\n')   # the split open at the kill
    return 100


def test_bag_left_with_stale_metadata_is_repaired(tmp_path):
    from conftest import run_cli
    bag = tmp_path / 'bag'
    sent = _stale_metadata_bag(bag)
    with Reader(bag) as r:
        assert r.message_count == 60                  # what a plain reader sees: 2 splits missing
    # The audit reads through the repair, without changing the bag.
    out = tmp_path / 'audit'
    proc = run_cli('audit', str(bag), '--scene', str(Path(__file__).resolve().parents[1] / 'config' / 'scenes' /
                                                    'kitchen_demo.yaml'),
                   '--only', 'reach_in_fixture_only_when_fully_open', '--out', str(out), '--quiet', timeout=600)
    assert proc.returncode == 0, proc.stderr
    import json
    report = json.loads((out / 'report.json').read_text())
    assert report['frames'] == sent                   # 5 s of 20 Hz frames, not 3 s
    warnings = report['episodes'][0]['warnings']
    assert any('listed again 2 split(s)' in w for w in warnings) and any('lost' in w for w in warnings)
    assert 'listed again 2 split(s)' in proc.stderr and 'listed again 2 split(s)' in (out / 'report.html').read_text()
    with Reader(bag) as r:
        assert r.message_count == 60                  # untouched by the audit
    proc = run_cli('bag', 'repair', str(bag))
    assert proc.returncode == 0 and 'listed again 2 split(s)' in proc.stdout and 'split_5' in proc.stdout
    with Reader(bag) as r:
        assert r.message_count == sent
    assert 'listed again 0 split(s)' in run_cli('bag', 'repair', str(bag)).stdout   # idempotent
