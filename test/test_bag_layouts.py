"""Column-wise decoding of raw input messages gives exactly what rosbags'
deserializer gives: every number bit for bit, and the grounding samples
built from the columns equal the samples built from deserialized messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from safemanip_ros.bag.bulk import RecordBatch
from safemanip_ros.bag.layouts import LayoutDecoder, LayoutError, parse_layout
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.grounding.messages import sample_of
from safemanip_ros.grounding.rawinputs import SampleDecoder

TOPIC = {'sensor_msgs/msg/JointState': '/joint_states', 'tf2_msgs/msg/TFMessage': '/tf',
         'safemanip_ros/msg/ContactArray': '/contacts', 'geometry_msgs/msg/WrenchStamped': '/wrench'}
SPECIAL = [float('nan'), float('inf'), -float('inf'), -0.0, 5e-324, 1.7976931348623157e308]


def _f(rng) -> float:
    return SPECIAL[int(rng.integers(0, len(SPECIAL)))] if rng.random() < 0.1 else float(rng.normal(0, 3))


def _name(rng) -> str:
    return 'n' * int(rng.integers(1, 9)) + str(int(rng.integers(0, 3)))    # odd lengths: padding everywhere


def _stamp(ts, rng):
    return ts.types['builtin_interfaces/msg/Time'](sec=int(rng.integers(-2**31, 2**31)),
                                                  nanosec=int(rng.integers(0, 10**9)))


def _header(ts, rng, frame=None):
    return ts.types['std_msgs/msg/Header'](stamp=_stamp(ts, rng), frame_id=frame if frame is not None else _name(rng))


def _message(ts, rng, msgtype: str, layout: int):
    """A message of one of a few layouts per type (the layout fixes names and counts)."""
    lr = np.random.default_rng(layout)
    if msgtype == 'sensor_msgs/msg/JointState':
        names = [_name(lr) for _ in range(int(lr.integers(0, 9)))]
        n_vel = [len(names), 0, max(0, len(names) - 1)][layout % 3]
        return ts.types[msgtype](header=_header(ts, rng, 'base'), name=names,
                                 position=np.array([_f(rng) for _ in names]),
                                 velocity=np.array([_f(rng) for _ in range(n_vel)]),
                                 effort=np.array([_f(rng) for _ in range(int(lr.integers(0, 3)))]))
    if msgtype == 'tf2_msgs/msg/TFMessage':
        V, Q = ts.types['geometry_msgs/msg/Vector3'], ts.types['geometry_msgs/msg/Quaternion']
        T, TS = ts.types['geometry_msgs/msg/Transform'], ts.types['geometry_msgs/msg/TransformStamped']
        frames = [(_name(lr), _name(lr)) for _ in range(int(lr.integers(0, 6)))]
        shared = _stamp(ts, rng)
        return ts.types[msgtype](transforms=[
            TS(header=ts.types['std_msgs/msg/Header'](stamp=shared if rng.random() < 0.7 else _stamp(ts, rng),
                                                      frame_id=p),
               child_frame_id=c, transform=T(translation=V(x=_f(rng), y=_f(rng), z=_f(rng)),
                                             rotation=Q(x=_f(rng), y=_f(rng), z=_f(rng), w=_f(rng))))
            for p, c in frames])
    if msgtype == 'safemanip_ros/msg/ContactArray':
        P, V = ts.types['geometry_msgs/msg/Point'], ts.types['geometry_msgs/msg/Vector3']
        C = ts.types['safemanip_ros/msg/Contact']
        bodies = [(_name(lr), _name(lr)) for _ in range(int(lr.integers(0, 5)))]
        return ts.types[msgtype](header=_header(ts, rng, _name(lr)), contacts=[
            C(body1=a, body2=b, position=P(x=_f(rng), y=_f(rng), z=_f(rng)),
              normal=V(x=_f(rng), y=_f(rng), z=_f(rng)), normal_force_n=_f(rng), depth_m=_f(rng))
            for a, b in bodies])
    W, V = ts.types['geometry_msgs/msg/Wrench'], ts.types['geometry_msgs/msg/Vector3']
    return ts.types[msgtype](header=_header(ts, rng, _name(lr)), wrench=W(force=V(x=_f(rng), y=_f(rng), z=_f(rng)),
                                                                torque=V(x=_f(rng), y=_f(rng), z=_f(rng))))


def _bits(x):
    """Values compared bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    if isinstance(x, float):
        return ('f', np.float64(x).tobytes())
    if isinstance(x, np.ndarray):
        return ('a', x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_bits(v) for v in x])
    if hasattr(x, '__dataclass_fields__'):
        return (type(x).__name__, [_bits(getattr(x, f)) for f in x.__dataclass_fields__])
    return (type(x).__name__, x)


def _attr(msg, path: str):
    """The value at a layout path (``transforms[2].transform.rotation.w``)."""
    value = msg
    for part in path.split('.'):
        name, _, index = part.partition('[')
        value = getattr(value, name)
        if index:
            value = value[int(index[:-1])]
    return value


def _scribble(ts, msgtype: str, raw: bytes, rng) -> bytes:
    """``raw`` with garbage in its alignment and final padding bytes, as
    serializers that do not zero them leave it (rosbags ignores them)."""
    buf = bytearray(raw + b'\x00' * int(rng.integers(0, 4)))     # up to 3 bytes of final padding
    for k in parse_layout(ts, msgtype, bytes(buf)).padding:
        buf[k] = int(rng.integers(1, 256))
    return bytes(buf)


@pytest.mark.parametrize('scribbled', [False, True])
@pytest.mark.parametrize('msgtype', sorted(TOPIC))
def test_columns_and_samples_equal_rosbags(msgtype, scribbled):
    ts = typestore()
    rng = np.random.default_rng(11)
    msgs = [_message(ts, rng, msgtype, int(rng.integers(0, 5))) for _ in range(300)]
    raws = [bytes(ts.serialize_cdr(m, msgtype)) for m in msgs]
    if scribbled:
        raws = [_scribble(ts, msgtype, raw, rng) for raw in raws]
    decoder = LayoutDecoder(ts, msgtype)
    columns, rejected = decoder.decode(raws[:150])
    more, rejected2 = decoder.decode(raws[150:])        # layouts carry over from batch to batch
    assert not len(rejected) and not len(rejected2)
    assert sum(len(c.rows) for c in columns + more) == len(raws)
    assert len(decoder.layouts) <= (20 if scribbled else 5)     # final padding changes the length
    for c, offset in [(c, 0) for c in columns] + [(c, 150) for c in more]:
        for k, row in enumerate(c.rows.tolist()):
            ref = ts.deserialize_cdr(raws[offset + row], msgtype)
            for path, col in c.numbers.items():
                assert _bits(col[k].item()) == _bits(type(col[k].item())(_attr(ref, path))), path
            for path, text in c.layout.strings.items():
                assert _attr(ref, path) == text
    conn = type('Conn', (), {'msgtype': msgtype, 'topic': TOPIC[msgtype]})()
    samples = SampleDecoder(ts).decode(RecordBatch([conn] * len(raws), np.zeros(len(raws), np.int64), raws), 'test')
    for raw, sample in zip(raws, samples):
        assert _bits(sample) == _bits(sample_of(TOPIC[msgtype], ts.deserialize_cdr(raw, msgtype)))


def test_messages_no_layout_takes_are_left_to_rosbags():
    ts = typestore()
    rng = np.random.default_rng(2)
    msgtype = 'sensor_msgs/msg/JointState'
    good = bytes(ts.serialize_cdr(_message(ts, rng, msgtype, 1), msgtype))
    bad = [good[:-9], b'\x01\x00' + good[2:], good + b'\x00' * 8]       # truncated, big-endian, trailing bytes
    columns, rejected = LayoutDecoder(ts, msgtype).decode([good] + bad)
    assert sum(len(c.rows) for c in columns) == 1 and rejected.tolist() == [1, 2, 3]
    with pytest.raises(LayoutError, match='truncated'):
        parse_layout(ts, msgtype, good[:-9])
    image = ts.types['sensor_msgs/msg/Image'](header=_header(ts, rng), height=80, width=80, encoding='mono8',
                                              is_bigendian=0, step=80, data=np.zeros(6400, np.uint8))
    with pytest.raises(LayoutError, match='more than'):
        parse_layout(ts, 'sensor_msgs/msg/Image', bytes(ts.serialize_cdr(image, 'sensor_msgs/msg/Image')))


def raw_bag_samples_equal_rosbags(bag: Path) -> int:
    """Every raw input message of a recorded bag: the column-wise sample equals
    the sample of the deserialized message.  Returns the messages compared
    (used on simulated rollouts by test_sim)."""
    from rosbags.rosbag2 import Reader

    from safemanip_ros.bag.bulk import read_batches
    ts = typestore()
    n = 0
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.msgtype in TOPIC]
        decoder = SampleDecoder(ts)
        for batch in read_batches(reader, conns):
            for conn, raw, sample in zip(batch.connections, batch.raws, decoder.decode(batch, str(bag))):
                assert sample is not None
                assert _bits(sample) == _bits(sample_of(conn.topic, ts.deserialize_cdr(raw, conn.msgtype)))
                n += 1
    return n


@pytest.mark.slow
@pytest.mark.ros
def test_payloads_from_real_dds_decode_like_rosbags(tmp_path):
    """Raw inputs as a bag holds them: payloads received from another
    process over Fast DDS (the bytes a recorder stores), decoded column-wise,
    equal rosbags' deserialization of the same bytes."""
    import importlib
    import time

    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from ros_helpers import echo_process, ros_node
    from test_msgs_dds import filled

    received: dict[str, list[bytes]] = {t: [] for t in TOPIC}
    sent = {}
    variants = 4
    with echo_process('/roundtrip_layouts', TOPIC, tmp_path / 'echo.log'), \
            ros_node('layouts_dds_test') as (node, executor):
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        pubs = {}
        for msgtype in TOPIC:
            pkg, _, name = msgtype.split('/')
            cls = getattr(importlib.import_module(f'{pkg}.msg'), name)
            node.create_subscription(cls, f'/roundtrip_layouts/out/{name}',
                                     lambda raw, t=msgtype: received[t].append(bytes(raw)), qos, raw=True)
            pubs[msgtype] = node.create_publisher(cls, f'/roundtrip_layouts/in/{name}', qos)
            msgs = [filled(cls, seed) for seed in range(1, variants + 1)]
            if msgtype == 'sensor_msgs/msg/JointState':
                msgs[0].effort = []                     # ends on a sequence count: not 8-byte aligned
                msgs[1].name, msgs[1].position, msgs[1].velocity = ['a', 'bb', 'ccc'], [0.5, 1.5, 2.5], []
            sent[msgtype] = msgs
        deadline = time.monotonic() + 60
        published = False
        while any(len(v) < variants for v in received.values()) and time.monotonic() < deadline:
            if not published and all(p.get_subscription_count() > 0 for p in pubs.values()):
                for msgtype, pub in pubs.items():
                    for msg in sent[msgtype]:
                        pub.publish(msg)
                published = True
            executor.spin_once(timeout_sec=0.05)
        assert all(len(v) == variants for v in received.values()), {t: len(v) for t, v in received.items()}
    ts = typestore()
    for msgtype, raws in received.items():
        conn = type('Conn', (), {'msgtype': msgtype, 'topic': TOPIC[msgtype]})()
        samples = SampleDecoder(ts).decode(RecordBatch([conn] * len(raws), np.zeros(len(raws), np.int64), raws), 'dds')
        for raw, sample in zip(raws, samples):
            assert sample is not None, (msgtype, raw.hex())
            assert _bits(sample) == _bits(sample_of(TOPIC[msgtype], ts.deserialize_cdr(raw, msgtype)))


def test_messages_whose_strings_always_change_go_to_rosbags():
    """A frame id with a counter makes every message its own layout: past
    MAX_LAYOUTS the decoder stops building them (matching would be quadratic)
    and leaves the rest to rosbags."""
    from safemanip_ros.bag.layouts import MAX_LAYOUTS
    ts = typestore()
    rng = np.random.default_rng(4)
    msgtype = 'geometry_msgs/msg/WrenchStamped'
    W, V = ts.types[msgtype], ts.types['geometry_msgs/msg/Vector3']
    raws = [bytes(ts.serialize_cdr(W(header=_header(ts, rng, f'frame{k:05d}'), wrench=ts.types['geometry_msgs/msg/Wrench'](
        force=V(x=1.0, y=2.0, z=3.0), torque=V(x=0.0, y=0.0, z=float(k)))), msgtype)) for k in range(MAX_LAYOUTS + 50)]
    decoder = LayoutDecoder(ts, msgtype)
    columns, rejected = decoder.decode(raws)
    assert len(decoder.layouts) == MAX_LAYOUTS and len(rejected) == 50
    assert sorted(r for c in columns for r in c.rows.tolist()) + rejected.tolist() == list(range(len(raws)))
