"""A Foxglove WebSocket server in this process, fed without blocking.

The Foxglove SDK (``foxglove-sdk``: a Rust core) serves the channels to
Foxglove (the app, or any client of the ``foxglove.sdk.v1`` WebSocket
subprotocol) and, optionally, writes them to an MCAP file that opens with
the same layout.  What the monitor's thread hands over goes on a bounded
queue: a producer (a function making the messages) is run on the server's
own thread, so decoding and JSON never take the frame's time, and a full
queue drops the newest item and counts it instead of waiting.

Every channel is JSON: ours under ``safemanip.*`` schema names, TF and the
3D markers under Foxglove's own (``foxglove.FrameTransforms``,
``foxglove.SceneUpdate``, ``foxglove.Log``), which its panels recognise by
name whatever the encoding.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FoxgloveError

__all__ = ['CHANNELS', 'Address', 'FoxgloveServer', 'Message', 'ServiceSpec', 'make_channels', 'parse_address', 'sdk']

DEFAULT_HOST = '127.0.0.1'

# topic → (schema name, JSON schema of its messages)
_TIME = {'type': 'object', 'properties': {'sec': {'type': 'integer'}, 'nsec': {'type': 'integer'}}}
_OBJECT: dict[str, Any] = {'type': 'object'}
CHANNELS: dict[str, tuple[str, dict[str, Any]]] = {
    '/safemanip/verdicts': ('safemanip.Verdicts', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'episode_id': {'type': 'string'}, 'frame': {'type': 'integer'},
        'instances': {'type': 'array', 'items': {'type': 'object', 'properties': {
            'property': {'type': 'string'}, 'instance': {'type': 'string'}, 'verdict': {'type': 'string'},
            'violated': {'type': 'boolean'}, 'recovery_verdict': {'type': 'string'}, 'state': {'type': 'string'}}}}}}),
    '/safemanip/violations': ('safemanip.ViolationEvent', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'event': {'type': 'string'}, 'property': {'type': 'string'},
        'instance': {'type': 'string'}, 'category': {'type': 'string'}, 'severity': {'type': 'string'},
        'episode_id': {'type': 'string'}, 'start_frame': {'type': 'integer'}, 'end_frame': {'type': 'integer'},
        'recovered': {'type': 'boolean'}, 'count': {'type': 'integer'},
        'binding': {'type': 'array', 'items': {'type': 'object', 'properties': {
            'key': {'type': 'string'}, 'value': {'type': 'string'}}}}}}),
    '/safemanip/supervisor': ('safemanip.SupervisorAction', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'action': {'type': 'string'}, 'property': {'type': 'string'},
        'instance': {'type': 'string'}, 'reason': {'type': 'string'}, 'frame': {'type': 'integer'},
        'success': {'type': 'boolean'}}}),
    '/safemanip/hold': ('safemanip.Hold', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'held': {'type': 'boolean'}, 'state': {'type': 'string'}, 'reason': {'type': 'string'}}}),
    '/safemanip/gate': ('safemanip.GateDecision', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'name': {'type': 'string'}, 'robot': {'type': 'string'}, 'unit': {'type': 'string'},
        'limit': {'type': 'number'}, 'alpha': {'type': 'number'}, 'decision': {'type': 'string'},
        'observations': {'type': 'integer'}, 'violations': {'type': 'integer'}, 'rollouts': {'type': 'integer'},
        'rate': {'type': 'number'}, 'decided_after': {'type': 'integer'}}}),
    '/safemanip/log': ('foxglove.Log', _OBJECT),
    '/safemanip/markers': ('foxglove.SceneUpdate', _OBJECT),
    '/safemanip/robot': ('foxglove.SceneUpdate', _OBJECT),
    '/safemanip/server': ('safemanip.ServerHealth', {'type': 'object', 'properties': {
        'timestamp': _TIME, 'queued': {'type': 'integer'}, 'dropped': {'type': 'integer'},
        'sent': {'type': 'integer'}, 'errors': {'type': 'integer'}}}),
    '/tf': ('foxglove.FrameTransforms', _OBJECT),
    # The stack's /diagnostics under ROS 2's type name: Foxglove's Diagnostics panels read it.
    '/diagnostics': ('diagnostic_msgs/msg/DiagnosticArray', _OBJECT),
}
"""Every channel the server advertises: topic → (schema name, JSON schema)."""

Message = tuple[str, dict[str, Any], int]
"""(topic, JSON-able message, log time ns)."""


def make_channels(context: Any) -> dict[str, Any]:
    """Every channel of :data:`CHANNELS` in a Foxglove SDK ``context``, JSON-encoded, schemas embedded."""
    from foxglove import Channel, Schema
    return {topic: Channel(topic, schema=Schema(name=schema_name, encoding='jsonschema',
                                                data=json.dumps(schema).encode()),
                           message_encoding='json', context=context)
            for topic, (schema_name, schema) in CHANNELS.items()}


def sdk() -> Any:
    """The Foxglove SDK module, or a FoxgloveError saying how to install it."""
    try:
        import foxglove
    except ImportError as err:
        raise FoxgloveError(f'the Foxglove SDK is not installed ({err}); pip install foxglove-sdk') from None
    return foxglove


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f'ws://{self.host}:{self.port}'


def parse_address(text: str) -> Address:
    """``[HOST:]PORT`` (host default 127.0.0.1: only this machine; name
    another host, or 0.0.0.0, to serve a network).  Port 0: any free one."""
    host, sep, port_text = text.rpartition(':')
    host = host.strip('[]') if sep else DEFAULT_HOST
    if not host or any(c.isspace() or c in '/@?#' for c in host):
        raise FoxgloveError(f'--foxglove {text!r}: expected [HOST:]PORT, e.g. 8765 or 127.0.0.1:8765')
    try:
        port = int(port_text)
    except ValueError:
        raise FoxgloveError(f'--foxglove {text!r}: the port is not a number (expected [HOST:]PORT)') from None
    if not 0 <= port <= 65535:
        raise FoxgloveError(f'--foxglove {text!r}: port {port} is outside [0, 65535]')
    return Address(host, port)


@dataclass(frozen=True)
class ServiceSpec:
    """An operator action offered as a Foxglove service: ``handler(client
    id, request)`` answers a JSON object, or raises to refuse (the client
    sees the exception's text)."""

    name: str
    description: str
    handler: Callable[[int, dict[str, Any]], dict[str, Any]]


class FoxgloveServer:
    """The server and its feeding thread (module docstring).

    ``address``: where it listens; ``services``: operator actions (none:
    read-only); ``mcap_path``: also write every channel to this MCAP file;
    ``queue_size``: items waiting for the thread before new ones are dropped."""

    def __init__(self, address: Address, services: Iterable[ServiceSpec] = (), mcap_path: Path | None = None,
                 queue_size: int = 2000, name: str = 'safemanip') -> None:
        foxglove = sdk()
        from foxglove import Schema
        from foxglove.websocket import Capability, MessageSchema, Service, ServiceSchema
        self._ctx = foxglove.Context()
        self._channels = make_channels(self._ctx)
        any_object = Schema(name='safemanip.Json', encoding='jsonschema', data=b'{"type": "object"}')
        sdk_services = [Service(name=s.name, schema=ServiceSchema(
            name=f'safemanip.{s.name.rsplit("/", 1)[-1]}', request=MessageSchema(encoding='json', schema=any_object),
            response=MessageSchema(encoding='json', schema=any_object)), handler=self._serve(s))
            for s in services]
        self._mcap = None
        if mcap_path is not None:
            try:
                self._mcap = foxglove.open_mcap(str(mcap_path), allow_overwrite=False, context=self._ctx)
            except Exception as err:       # the SDK's own error types: one of ours, naming the file
                raise FoxgloveError(f'{mcap_path}: cannot write the Foxglove MCAP ({err})') from None
        try:
            self._server = foxglove.start_server(
                name=name, host=address.host, port=address.port, context=self._ctx,
                capabilities=[Capability.Services] if sdk_services else [], services=sdk_services or None,
                supported_encodings=['json'])
        except Exception as err:           # port taken, host not ours: one line, no traceback
            if self._mcap is not None:
                self._mcap.close()
            raise FoxgloveError(f'--foxglove {address.host}:{address.port}: cannot listen ({err})') from None
        self.address = Address(address.host, int(self._server.port))
        self._queue: queue.Queue[Callable[[], Iterable[Message]] | None] = queue.Queue(maxsize=queue_size)
        self.dropped = 0
        self.sent = 0
        self.errors = 0
        self.last_error = ''
        self.cpu_s = 0.0           # CPU time of this thread making and sending the messages
        self._thread = threading.Thread(target=self._run, name='foxglove', daemon=True)
        self._thread.start()

    @staticmethod
    def _serve(spec: ServiceSpec) -> Callable[[Any], bytes]:
        def handle(request: Any) -> bytes:
            try:
                body = json.loads(bytes(request.payload) or b'{}')
            except ValueError:
                raise ValueError(f'{spec.name}: the request is not JSON') from None
            if not isinstance(body, dict):
                raise ValueError(f'{spec.name}: the request must be a JSON object')
            return json.dumps(spec.handler(int(request.client_id), body)).encode()
        return handle

    def offer(self, producer: Callable[[], Iterable[Message]]) -> bool:
        """Queue ``producer`` (run on the server's thread; it returns the
        messages to log).  Never blocks: False when the queue is full (the
        item is dropped and counted)."""
        try:
            self._queue.put_nowait(producer)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            producer = self._queue.get()
            if producer is None:
                return
            started_s = time.thread_time()
            try:
                for topic, message, log_time_ns in producer():
                    self._channels[topic].log(message, log_time=int(log_time_ns))
                    self.sent += 1
            except Exception as err:       # a message we could not make or log: counted, the server goes on
                self.errors += 1
                self.last_error = f'{type(err).__name__}: {err}'
            self.cpu_s += time.thread_time() - started_s

    def stop(self) -> None:
        """Send what is queued, then stop serving and close the MCAP file."""
        try:
            self._queue.put(None, timeout=5.0)
        except queue.Full:
            pass
        self._thread.join(timeout=10.0)
        self._server.stop()
        if self._mcap is not None:
            self._mcap.close()
