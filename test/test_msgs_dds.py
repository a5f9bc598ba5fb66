"""Every message type of msg/ (and our tf2_msgs/TFMessage build) crosses
real Fast DDS between two processes unchanged, field by field."""

from __future__ import annotations

import importlib
import time

import pytest
from conftest import REPO
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from ros_helpers import echo_process, ros_node

MSG_NAMES = sorted(p.stem for p in (REPO / 'msg').glob('*.msg'))
TYPES = [f'safemanip_ros/msg/{n}' for n in MSG_NAMES] + ['tf2_msgs/msg/TFMessage']

_SCALARS = {
    'boolean': lambda i: True,
    'string': lambda i: f'value_{i}_é',
    'float64': lambda i: 1.25 + i, 'double': lambda i: 1.25 + i, 'float32': lambda i: 0.5 + i, 'float': lambda i: 0.5 + i,
    'uint8': lambda i: 200 - i, 'octet': lambda i: bytes([i % 256]), 'int8': lambda i: -5 - i,
    'uint16': lambda i: 60000 - i, 'int16': lambda i: -3000 - i,
    'uint32': lambda i: 4_000_000_000 - i, 'int32': lambda i: -2_000_000_000 + i,
    'uint64': lambda i: 2**63 + 12345 + i, 'int64': lambda i: -(2**62) - i,
}


def _type_class(spec: str):
    pkg, _, name = spec.split('/')
    return getattr(importlib.import_module(f'{pkg}.msg'), name)


def filled(cls, seed: int = 1):
    """An instance of ``cls`` with a non-default value in every field."""
    msg = cls()
    for i, (field, ftype) in enumerate(cls.get_fields_and_field_types().items(), start=seed):
        setattr(msg, field, _value(ftype, i))
    return msg


def _value(ftype: str, i: int):
    if ftype.startswith('sequence<'):
        inner = ftype[len('sequence<'):-1].split(',')[0]
        return [_value(inner, i), _value(inner, i + 1)]
    if ftype in _SCALARS:
        return _SCALARS[ftype](i)
    if ftype.startswith('string<='):
        return 'bounded'
    if '/' in ftype:
        pkg, name = ftype.split('/')
        return filled(getattr(importlib.import_module(f'{pkg}.msg'), name), i)
    raise AssertionError(f'no filler for field type {ftype}')


def assert_fields_equal(a, b, path: str = '') -> None:
    assert type(a) is type(b), path
    for field in type(a).get_fields_and_field_types():
        x, y = getattr(a, field), getattr(b, field)
        where = f'{path}.{field}'
        if hasattr(x, 'get_fields_and_field_types'):
            assert_fields_equal(x, y, where)
        elif isinstance(x, (list, tuple)) and x and hasattr(x[0], 'get_fields_and_field_types'):
            assert len(x) == len(y), where
            for k, (xi, yi) in enumerate(zip(x, y)):
                assert_fields_equal(xi, yi, f'{where}[{k}]')
        else:
            assert list(x) == list(y) if isinstance(x, (list, tuple)) else x == y, f'{where}: {x!r} != {y!r}'


def test_filled_messages_differ_from_defaults():
    # The round trip would be meaningless if the filler left fields at their defaults.
    for spec in TYPES:
        cls = _type_class(spec)
        msg, default = filled(cls), cls()
        for field in cls.get_fields_and_field_types():
            assert getattr(msg, field) != getattr(default, field), f'{spec}.{field}'


@pytest.mark.ros
def test_every_message_type_round_trips_over_dds(tmp_path):
    with echo_process('/roundtrip_msgs', TYPES, tmp_path / 'echo.log'):
        _round_trip_every_type()


def _round_trip_every_type() -> None:
    with ros_node('roundtrip_test') as (node, executor):
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        received: dict[str, object] = {}
        pubs = {}
        sent = {}
        for spec in TYPES:
            cls = _type_class(spec)
            name = spec.rsplit('/', 1)[1]
            node.create_subscription(cls, f'/roundtrip_msgs/out/{name}',
                                     lambda m, name=name: received.setdefault(name, m), qos)
            pubs[name] = node.create_publisher(cls, f'/roundtrip_msgs/in/{name}', qos)
            sent[name] = filled(cls)
        deadline = time.monotonic() + 60
        published = False
        while len(received) < len(TYPES) and time.monotonic() < deadline:
            if not published and all(p.get_subscription_count() > 0 for p in pubs.values()):
                for name, pub in pubs.items():
                    pub.publish(sent[name])
                published = True
            executor.spin_once(timeout_sec=0.05)
        missing = sorted(set(sent) - set(received))
        assert not missing, f'no echo for {missing} within 60 s'
        for name, msg in sent.items():
            assert_fields_equal(msg, received[name], name)
            assert msg == received[name]
