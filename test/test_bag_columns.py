"""The column-wise PredicateArray decoder and framing give exactly what
rosbags' deserializer and the message-by-message SampleHold loop give."""

from __future__ import annotations

import numpy as np
import pytest

from safemanip_ros.audit import rollouts as rollouts_mod
from safemanip_ros.bag.columns import ColumnDecodeError, decode_predicate_arrays, parse_predicate_array
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import SplitBagWriter

TYPE = 'safemanip_ros/msg/PredicateArray'


def _msg(ts, rng, names, t_ns, seq, source='src'):
    Arr, Pred = ts.types[TYPE], ts.types['safemanip_ros/msg/Predicate']
    Time, Header = ts.types['builtin_interfaces/msg/Time'], ts.types['std_msgs/msg/Header']
    stamp = Time(sec=int(t_ns // 1_000_000_000), nanosec=int(t_ns % 1_000_000_000))
    return Arr(header=Header(stamp=stamp, frame_id='frame' * int(rng.integers(0, 2))), seq=seq, predicates=[
        Pred(name=n, value=bool(rng.random() < 0.5), unknown=bool(rng.random() < 0.1), source=source,
             data_stamp=Time(sec=int(rng.integers(0, 2**31 - 1)), nanosec=int(rng.integers(0, 10**9))))
        for n in names])


def test_decoder_matches_rosbags_bit_for_bit():
    ts = typestore()
    rng = np.random.default_rng(1)
    layouts = [['a', 'bb', 'ccc'], ['a', 'bb', 'ccc', 'dddd_long_name'], [], ['x' * 37]]
    msgs = [_msg(ts, rng, layouts[int(rng.integers(0, 4))], int(rng.integers(0, 2**60)), k,
                 source=['s', 'source'][int(rng.integers(0, 2))]) for k in range(400)]
    raws = [bytes(ts.serialize_cdr(m, TYPE)) for m in msgs]
    groups = decode_predicate_arrays(raws)
    assert sum(len(g.rows) for g in groups) == len(raws)
    for g in groups:
        for k, row in enumerate(g.rows):
            ref = ts.deserialize_cdr(raws[row], TYPE)
            assert g.layout.names == tuple(p.name for p in ref.predicates)
            assert g.values[k].tolist() == [bool(p.value) for p in ref.predicates]
            assert g.unknown[k].tolist() == [bool(p.unknown) for p in ref.predicates]
            assert g.stamp_ns[k] == ref.header.stamp.sec * 1_000_000_000 + ref.header.stamp.nanosec
    with pytest.raises(ColumnDecodeError, match='truncated'):
        parse_predicate_array(raws[0][:-3])
    with pytest.raises(ColumnDecodeError, match='4 trailing bytes'):      # rosbags takes up to 3, as we do
        parse_predicate_array(raws[0] + b'\x00' * 4)
    with pytest.raises(ColumnDecodeError, match='not little-endian CDR'):
        parse_predicate_array(b'\x00\x00' + raws[0][2:])


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_column_framing_equals_the_message_loop(tmp_path, storage):
    """Several topics, layouts that change, unknowns, a predicate on two
    topics, jittered and missing samples, and a hole that splits the rollout."""
    ts = typestore()
    rng = np.random.default_rng(7)
    w = SplitBagWriter(tmp_path / 'bag', storage, split_s=3.0)
    topics = {'/predicates/a': ['p1', 'p2', 'shared'], '/predicates/b': ['p3', 'shared', 'unread']}
    for topic in topics:
        w.add_topic(topic, TYPE)
    t = 1_700_000_000_000_000_000
    for k in range(600):
        t += int(rng.integers(20_000_000, 80_000_000)) + (15_000_000_000 if k == 300 else 0)
        topic = list(topics)[int(rng.integers(0, 2))]
        names = topics[topic] if k % 97 else topics[topic][:-1]          # the layout changes now and then
        w.write(topic, t, ts.serialize_cdr(_msg(ts, rng, names, t, k), TYPE))
    w.close()
    predicates = ['p1', 'p2', 'p3', 'shared', 'never']
    fast = rollouts_mod.read_bag(tmp_path / 'bag', predicates, 20.0, 0.12)
    slow = rollouts_mod.read_bag(tmp_path / 'bag', predicates, 20.0, 0.12, columnar=False)
    assert {e.reader for e in fast} == {'predicate columns'} and {e.reader for e in slow} == {'message loop'}
    assert [e.name for e in fast] == [e.name for e in slow] == ['bag', 'bag#gap1']
    for f, s in zip(fast, slow):
        assert f.values.shape == s.values.shape
        assert np.array_equal(f.values, s.values) and np.array_equal(f.unknown, s.unknown)
        assert f.warnings == s.warnings
        # Each frame's time, the same from both readers: one period apart within a segment.
        assert f.frame_ns is not None and np.array_equal(f.frame_ns, s.frame_ns) and len(f.frame_ns) == len(f.values)
        assert set(np.diff(f.frame_ns).tolist()) == {50_000_000}
    assert fast[0].unknown[:, 4].all()                     # never published: unknown


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_a_name_given_twice_in_a_message_is_unknown_where_they_disagree(tmp_path, storage):
    """A publisher's bug: one message names a predicate twice.  Both readers
    give it once — unknown where its two values disagree or either is
    unknown, else their value — and warn naming the topic and the name."""
    ts = typestore()
    rng = np.random.default_rng(3)
    w = SplitBagWriter(tmp_path / 'bag', storage, split_s=3.0)
    w.add_topic('/predicates/a', TYPE)
    t = 1_700_000_000_000_000_000
    sent = []
    for k in range(200):
        t += 50_000_000
        msg = _msg(ts, rng, ['p1', 'p2', 'p1'] if k % 2 else ['p1', 'p2'], t, k)
        sent.append([(p.name, bool(p.value), bool(p.unknown)) for p in msg.predicates])
        w.write('/predicates/a', t, ts.serialize_cdr(msg, TYPE))
    w.close()
    fast = rollouts_mod.read_bag(tmp_path / 'bag', ['p1', 'p2'], 20.0, 0.12)
    slow = rollouts_mod.read_bag(tmp_path / 'bag', ['p1', 'p2'], 20.0, 0.12, columnar=False)
    [f], [s] = fast, slow
    assert np.array_equal(f.values, s.values) and np.array_equal(f.unknown, s.unknown) and f.warnings == s.warnings
    assert any("topic /predicates/a: a message names 'p1' twice" in w for w in f.warnings), f.warnings
    # Frame k holds message k's values (one message per period, stamped on the frame's time).
    checked = 0
    for k, given in enumerate(sent):
        if len(given) < 3 or k >= len(f.values):
            continue
        (_, v1, u1), (_, v2, u2) = given[0], given[2]
        expect_unknown = u1 or u2 or v1 != v2
        assert f.unknown[k, 0] == expect_unknown, (k, given)
        assert f.values[k, 0] == (not expect_unknown and v1), (k, given)
        checked += 1
    assert checked > 90


def test_too_many_layouts_falls_back_and_drops_nothing(tmp_path):
    """A source string that changes in every message makes every message a
    layout of its own: past the decoder's limit the column path gives up
    (ColumnDecodeError) and the bag is read message by message, every
    message counted."""
    from safemanip_ros.bag.layouts import MAX_LAYOUTS
    ts = typestore()
    rng = np.random.default_rng(9)
    raws, t = [], 1_700_000_000_000_000_000
    w = SplitBagWriter(tmp_path / 'bag', 'mcap', split_s=100.0)
    w.add_topic('/predicates', TYPE)
    for k in range(MAX_LAYOUTS + 40):
        t += 50_000_000
        raw = ts.serialize_cdr(_msg(ts, rng, ['p1', 'p2'], t, k, source=f'node{k}'), TYPE)
        raws.append(bytes(raw))
        w.write('/predicates', t, raw)
    w.close()
    with pytest.raises(ColumnDecodeError, match=f'more than {MAX_LAYOUTS} message layouts'):
        decode_predicate_arrays(raws)
    [rollout] = rollouts_mod.read_bag(tmp_path / 'bag', ['p1', 'p2'], 20.0, 0.12)
    assert len(rollout.values) == len(raws)                 # one frame per message at 20 Hz, none dropped
    last = ts.deserialize_cdr(raws[-1], TYPE).predicates
    assert rollout.values[-1].tolist() == [bool(p.value and not p.unknown) for p in last]


def test_shared_qos_parses_equal_rosbags_own():
    """The memoised QoS parse (share_qos_parses) gives rosbags' values, a
    fresh list on every call, and raises on bad text every time."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
    from rosbags.rosbag2 import ReaderError, reader, storage_mcap, storage_sqlite3
    from rosbags.rosbag2.metadata import dump_qos_v8

    from safemanip_ros.bag.compat import share_qos_parses

    share_qos_parses()
    share_qos_parses()                   # idempotent: one memo, not a memo of a memo
    parse = storage_mcap.parse_qos
    assert parse.shared and not getattr(parse.original, 'shared', False)
    assert reader.parse_qos is parse and storage_sqlite3.parse_qos is parse   # one memo for every reader
    qos = [Qos(QosHistory.KEEP_LAST, depth, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL,
               QosTime(0, 0), QosTime(1, 5), QosLiveliness.AUTOMATIC, QosTime(2, 0), False) for depth in (1, 10)]
    text = dump_qos_v8(qos)
    first, second = parse(text), parse(text)
    assert first == second == parse.original(text) == qos
    assert first is not second
    first.clear()
    assert parse(text) == qos            # a caller changing its list changes nothing shared
    assert parse('') == [] and parse([]) == []
    for _ in range(2):
        with pytest.raises(ReaderError):
            parse('- {history: [unclosed')



@pytest.mark.parametrize('text', [
    '{"a": {"b": [1, 2.5, -3e2, "x", true, null]}, "c": "RIHS01_ab"}',   # JSON: parsed by json
    '{"a": 1, "a": 2}',                  # a repeated key: an error for YAML, so json must not take it
    '{"a": NaN, "b": Infinity}',         # strings in YAML, numbers for json: YAML's reading
    'rosbag2_bagfile_information:\n  version: 9\n  custom_data: {flag: yes}\n',   # block YAML
    '{"a": [1, 2}',                      # neither
])
def test_load_metadata_reads_as_ruamel_does(text):
    """load_metadata gives ruamel's values, or raises where ruamel raises."""
    from ruamel.yaml import YAML, YAMLError

    from safemanip_ros.bag.compat import load_metadata

    try:
        expected = YAML(typ='safe').load(text)
    except YAMLError:
        with pytest.raises(YAMLError):
            load_metadata(text)
        return
    got = load_metadata(text)
    assert got == expected and type(got) is type(expected)
    assert repr(got) == repr(expected)          # NaN != NaN: compare spellings too


def test_json_first_reader_opens_bags_as_rosbags_does(tmp_path):
    """Opening a bag written by our writer (JSON metadata) and one by
    rosbags' writer (block YAML) through the JSON-first metadata gives the
    same metadata and connections as rosbags' own ruamel parse."""
    from rosbags.rosbag2 import Reader, Writer
    from rosbags.rosbag2 import reader as reader_mod

    from safemanip_ros.bag.compat import _MetadataYAML, tune_rosbags

    ts = typestore()
    ours = tmp_path / 'ours'
    w = SplitBagWriter(ours, 'mcap', split_s=1.0)
    w.add_topic('/predicates', TYPE)
    rng = np.random.default_rng(3)
    for k in range(60):
        w.write('/predicates', k * 50_000_000, ts.serialize_cdr(_msg(ts, rng, ['a'], k * 50_000_000, k), TYPE))
    w.close()
    theirs = tmp_path / 'theirs'
    with Writer(theirs, version=9) as bw:
        conn = bw.add_connection('/predicates', TYPE, typestore=ts)
        bw.write(conn, 5, ts.serialize_cdr(_msg(ts, rng, ['a'], 5, 0), TYPE))
    assert (ours / 'metadata.yaml').read_text().startswith('{')
    assert not (theirs / 'metadata.yaml').read_text().startswith('{')

    def opened(bag):
        with Reader(bag) as r:
            return r.storage.metadata, [(c.id, c.topic, c.msgtype, c.digest, c.ext) for c in r.connections], \
                r.storage.files, [str(s.path) for s in r.storage.storages], [(t.msgcount, t.msgtype) for t in r.topics.values()]

    original = reader_mod.YAML
    tune_rosbags()
    tune_rosbags()                       # idempotent
    assert reader_mod.YAML is _MetadataYAML
    from ruamel.yaml import YAML
    assert all(type(reader_mod.YAML(**kw)) is YAML for kw in ({}, {'typ': 'rt'}, {'typ': 'safe', 'pure': True}))
    try:
        fast = [opened(b) for b in (ours, theirs)]
        reader_mod.YAML = __import__('ruamel.yaml', fromlist=['YAML']).YAML
        slow = [opened(b) for b in (ours, theirs)]
    finally:
        reader_mod.YAML = original
    assert fast == slow


def _segments_message_by_message(t, period_ns, max_gap_ns):
    """The message loop's segmentation: monitor/clock.FrameSchedule fed one
    message at a time, as audit/rollouts.py feeds it (the oracle for frame_segments)."""
    from safemanip_ros.monitor.clock import FrameSchedule
    schedule = FrameSchedule(period_ns, max_gap_ns)
    out = []
    seg_first, seg_start = 0, int(t[0])
    for i, stamp in enumerate(t.tolist()):
        frames, gap_after = schedule.take(stamp)
        if gap_after is not None:
            out.append((seg_first, i, seg_start, gap_after, stamp))
            seg_first, seg_start = i, stamp
    out.append((seg_first, len(t), seg_start, schedule.last(), None))
    return out


def test_the_frame_schedule_example_runs():
    import doctest

    import safemanip_ros.monitor.clock as clock_module
    assert doctest.testmod(clock_module).failed == 0


@pytest.mark.parametrize('seed', range(40))
def test_frame_segments_equal_the_message_loop(seed):
    """Stamps with jitter, ties, steps back in time (split files that
    overlap) and gaps, at several rates."""
    from safemanip_ros.monitor.clock import frame_segments
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    steps = rng.integers(0, 90_000_000, n)
    steps[rng.random(n) < 0.05] *= -3                      # a step back
    steps[rng.random(n) < 0.03] += 3_000_000_000           # a gap
    t = 1_700_000_000_000_000_000 + np.cumsum(steps)
    period_ns = int(1e9 / float(rng.choice([10.0, 20.0, 30.0])))
    got = frame_segments(t, period_ns, 2_000_000_000)
    assert got == _segments_message_by_message(t, period_ns, 2_000_000_000)
    if seed == 0:
        assert len(got) > 2


def test_sample_hold_gives_a_repeated_name_once():
    """The live monitor's path: SampleHold.update_many with a name listed
    twice — agreeing values hold, disagreeing or unknown ones are unknown;
    a later sample of a layout without the repeat reads as usual."""
    from safemanip_ros.monitor.frames import SampleHold
    hold = SampleHold(['a', 'b'], staleness_s=1.0)
    for values, unknown, expect_value, expect_unknown in (
            ([True, False, True], [False, False, False], True, False),
            ([False, False, False], [False, False, False], False, False),
            ([True, False, False], [False, False, False], False, True),
            ([True, False, True], [False, False, True], False, True)):
        hold.update_many(['a', 'b', 'a'], values, unknown, 0.0)
        v, u = hold.frame(0.0)
        assert (bool(v[0]), bool(u[0])) == (expect_value, expect_unknown), (values, unknown)
        assert (bool(v[1]), bool(u[1])) == (False, False)
    hold.update_many(['a'], [True], [False], 0.1)
    assert hold.frame(0.1)[0].tolist() == [True, False]
