"""Alerts that reach people, off the control path.

A violation or a gate decision becomes a small JSON document (an *alert*)
handed to :class:`AlertDispatcher`, which returns at once: each sink has its
own bounded queue and its own thread, so a sink that is down, slow or
failing never delays a hold, a verdict or another sink.  Per sink, an alert
is retried with exponential back-off; when a queue is full its oldest alert
is dropped and counted.  Alerts are deduplicated by key (one per violation
episode) and rate-limited per subject (a property, a gate limit): within
``min_interval_s`` of the last one sent for the same subject an alert is
held, and once the interval has passed the newest held alert is sent, saying
how many others it stands for (``suppressed``): nothing is lost quietly.
Every alert given up (after its retries) is handed to ``on_failure`` with
the sink and the reason, for the node's log and ``/diagnostics``.

Sinks (:class:`AlertSink`): :class:`JsonLinesSink` (one JSON document per
line, appended) and :class:`WebhookSink` (HTTP POST of the document,
``Content-Type: application/json``).  An alert counts as delivered only on a
2xx answer to the POST itself: a redirect is a failure (it is never
followed: that would re-send the alert as a bodiless GET), and so are any
other status, a refused connection and a send that has not finished within
``timeout_s`` as a whole (a server that trickles its answer is cut off).  Configured from YAML (:meth:`AlertConfig.from_mapping`),
e.g. in the supervisor's policy file::

    alerts:
      jsonl: /var/log/safemanip/alerts.jsonl
      webhook: {url: "http://127.0.0.1:8080/hook", timeout_s: 2.0}
      min_interval_s: 1.0
      queue: 256

Times in seconds.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import socket
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from ..realtime import background_thread
from ..spec.fields import Field, validate

Alert = dict[str, Any]


class AlertSink(Protocol):
    """Where alerts go; :meth:`send` raises on failure (the dispatcher retries)."""

    name: str

    def send(self, alert: Alert) -> None: ...


@dataclass
class JsonLinesSink:
    """Appends each alert as one line of JSON to ``path`` (its folder is created)."""

    path: Path
    name: str = 'jsonl'

    def send(self, alert: Alert) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, 'a', encoding='utf-8') as f:
            f.write(json.dumps(alert, sort_keys=True) + '\n')


@dataclass
class WebhookSink:
    """POSTs each alert as JSON to ``url``; the whole send (connect, request,
    answer) must finish within ``timeout_s``, and only a 2xx answer is
    delivery (module docstring)."""

    url: str
    timeout_s: float = 2.0
    name: str = 'webhook'

    def send(self, alert: Alert) -> None:
        parts = urllib.parse.urlsplit(self.url)
        conn_type = http.client.HTTPSConnection if parts.scheme == 'https' else http.client.HTTPConnection
        conn = conn_type(parts.hostname or '', parts.port, timeout=self.timeout_s)
        # urllib's timeout bounds each socket operation, not the send: a server answering a byte a
        # second would hold this sink's thread for good.  The deadline closes the socket under it.
        expired = threading.Event()

        def cut_off() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        timer = threading.Timer(self.timeout_s, cut_off)
        timer.daemon = True
        timer.start()
        try:
            path = parts.path or '/'
            conn.request('POST', path + (f'?{parts.query}' if parts.query else ''), body=json.dumps(alert).encode(),
                         headers={'Content-Type': 'application/json'})
            response = conn.getresponse()
            response.read(65536)
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise OSError(f'{self.url}: no complete answer within {self.timeout_s:g} s') from None
            raise OSError(f'{self.url}: {exc}') from None
        finally:
            timer.cancel()
            conn.close()
        if expired.is_set():
            raise OSError(f'{self.url}: no complete answer within {self.timeout_s:g} s')
        if 300 <= status < 400:
            where = response.getheader('Location') or '?'
            raise OSError(f'{self.url}: HTTP {status} redirect to {where[:200]!r}: not delivered '
                          '(redirects are not followed; configure the final URL)')
        if not 200 <= status < 300:
            raise OSError(f'{self.url}: HTTP {status}')


def _http_url(url: str) -> str | None:
    """What is wrong with a webhook URL, or None."""
    if not url.startswith(('http://', 'https://')):
        return f'expected an http:// or https:// URL, got {url!r}'
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port            # raises ValueError for a port out of 0..65535 or not a number
    except ValueError as err:
        return f'{url!r}: {err}'
    if not parts.hostname:
        return f'{url!r} names no host'
    if port == 0:
        return f'{url!r}: port 0 is not a port a server listens on'
    if any(c.isspace() or not c.isprintable() for c in url):
        return f'{url!r} contains spaces or control characters'
    return None


def _jsonl_path(path: str) -> str | None:
    """What is wrong with a JSON-lines sink's file, or None."""
    if not path.strip():
        return 'an empty path: name the file alerts are appended to'
    p = Path(path)
    if p.is_dir():
        return f'{path!r} is a folder: name the file alerts are appended to'
    if p.exists() and not os.access(p, os.W_OK):
        return f'{path!r} is not writable'
    ancestor = p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        return f'{path!r} cannot be made: {str(ancestor)!r} is not a folder this process may write in'
    return None


def _some_sink(data: Mapping[str, Any]) -> str | None:
    if not data.get('jsonl') and not data.get('webhook'):
        return 'no sink: give jsonl (a file) or webhook (a URL), or leave the alerts section out'
    return None


ALERTS_SCHEMA = Field('map', check=_some_sink, keys={
    'jsonl': Field('str', check=_jsonl_path),
    'webhook': Field('map', keys={'url': Field('str', required=True, check=_http_url),
                                  'timeout_s': Field('float', minimum=0.001)}),
    'min_interval_s': Field('float', minimum=0.0), 'queue': Field('int', minimum=1),
    'retries': Field('int', minimum=0), 'backoff_s': Field('float', minimum=0.0),
    'max_backoff_s': Field('float', minimum=0.0),
})
"""An ``alerts:`` section (in a supervisor's policy file, or the file of ``gate --live --alerts``)."""


@dataclass(frozen=True)
class AlertConfig:
    """The ``alerts:`` section of a YAML file."""

    jsonl: str = ''
    webhook_url: str = ''
    webhook_timeout_s: float = 2.0
    min_interval_s: float = 1.0
    queue: int = 256
    retries: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = 'alerts') -> 'AlertConfig':
        """Validate (:data:`ALERTS_SCHEMA`) and read an ``alerts:`` mapping (None or empty: no sink);
        ``where``: 'file:line' for the errors.

        Raises:
            SpecError: naming the file, line and field.
        """
        if data is None:
            return cls()
        validate(data, ALERTS_SCHEMA, where, 'alerts')
        hook = data.get('webhook') or {}
        return cls(jsonl=str(data.get('jsonl') or ''), webhook_url=str(hook.get('url', '')),
                   webhook_timeout_s=float(hook.get('timeout_s', 2.0)),
                   min_interval_s=float(data.get('min_interval_s', 1.0)), queue=int(data.get('queue', 256)),
                   retries=int(data.get('retries', 5)), backoff_s=float(data.get('backoff_s', 0.5)),
                   max_backoff_s=float(data.get('max_backoff_s', 8.0)))

    def sinks(self) -> list[AlertSink]:
        out: list[AlertSink] = []
        if self.jsonl:
            out.append(JsonLinesSink(Path(self.jsonl)))
        if self.webhook_url:
            out.append(WebhookSink(self.webhook_url, self.webhook_timeout_s))
        return out


@dataclass
class SinkStats:
    delivered: int = 0
    failed: int = 0        # given up after every retry
    dropped: int = 0       # pushed out of a full queue
    retries: int = 0
    last_error: str = ''   # the reason of the last failed attempt


FailureHook = Callable[[str, str, 'dict[str, SinkStats]'], None]
"""Called as ``on_failure(sink name, reason, every sink's stats)`` from the sink's thread when an alert is
given up or dropped."""


class _Worker:
    """One sink's bounded queue and thread."""

    def __init__(self, sink: AlertSink, cfg: AlertConfig, sleep: Callable[[float], bool],
                 on_failure: Callable[[str, str], None] | None) -> None:
        self.sink, self.cfg, self._sleep, self._on_failure = sink, cfg, sleep, on_failure
        self.queue: deque[Alert] = deque()
        self.stats = SinkStats()
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=f'alerts-{sink.name}', daemon=True)
        self.thread.start()

    def put(self, alert: Alert) -> None:
        with self.cond:
            dropped = len(self.queue) >= self.cfg.queue
            if dropped:
                self.queue.popleft()
                self.stats.dropped += 1
            self.queue.append(alert)
            self.cond.notify()
        if dropped:
            self._said(f'queue full ({self.cfg.queue}): the oldest alert was dropped')

    def _said(self, reason: str) -> None:
        if self._on_failure is not None:
            try:
                self._on_failure(self.sink.name, reason)
            except Exception:     # a failing log must not stop the sink
                pass

    def _run(self) -> None:
        background_thread()         # never competes with a real-time control path
        while True:
            with self.cond:
                while not self.queue and not self.closed:
                    self.cond.wait()
                if self.closed and not self.queue:
                    return
                alert = self.queue.popleft()
            delay = self.cfg.backoff_s
            for attempt in range(self.cfg.retries + 1):
                try:
                    self.sink.send(alert)
                    self.stats.delivered += 1
                    break
                except Exception as exc:   # any failure of a sink is its own: count it, back off, retry
                    self.stats.last_error = str(exc) or type(exc).__name__
                    if attempt == self.cfg.retries:
                        self.stats.failed += 1
                        self._said(f'alert given up after {attempt + 1} attempt(s): {self.stats.last_error}')
                        break
                    self.stats.retries += 1
                    if self._sleep(delay):
                        return             # closed while backing off
                    delay = min(delay * 2, self.cfg.max_backoff_s)


@dataclass
class AlertDispatcher:
    """Hands alerts to every sink without blocking (module docstring).

    ``flush_period_s``: how often a thread of its own sends held alerts whose
    interval has passed (None: only :meth:`flush_due`, :meth:`submit` and
    :meth:`close` do, for a caller that drives ``clock`` itself).
    """

    config: AlertConfig
    sinks: list[AlertSink] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    on_failure: FailureHook | None = None
    flush_period_s: float | None = 0.1

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        hook = self.on_failure
        said = None if hook is None else (lambda sink, why: hook(sink, why, self.stats()))
        self._workers = [_Worker(s, self.config, self._stop.wait, said) for s in self.sinks]
        self._keys: dict[str, None] = {}
        self._last_sent: dict[str, float] = {}
        self._held: dict[str, tuple[Alert, int]] = {}     # subject: (newest held alert, how many held)
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        if self._workers and self.flush_period_s is not None:
            self._flusher = threading.Thread(target=self._flush_loop, name='alerts-held', daemon=True)
            self._flusher.start()

    @classmethod
    def from_config(cls, config: AlertConfig, on_failure: FailureHook | None = None) -> 'AlertDispatcher':
        return cls(config, config.sinks(), on_failure=on_failure)

    def submit(self, alert: Alert, key: str, subject: str) -> bool:
        """Queue ``alert`` for every sink and return at once; False when
        ``key`` was seen already, or when ``subject`` is rate-limited: then
        the alert is held and sent once the interval has passed (module
        docstring)."""
        if not self._workers:
            return False
        self.flush_due()
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            while len(self._keys) > 100_000:
                self._keys.pop(next(iter(self._keys)))
            now = self.clock()
            last = self._last_sent.get(subject)
            if subject in self._held or (last is not None and now - last < self.config.min_interval_s):
                held = self._held.get(subject)
                self._held[subject] = (alert, (held[1] if held else 0) + 1)
                return False
            self._last_sent[subject] = now
        self._put(alert)
        return True

    def flush_due(self, everything: bool = False) -> int:
        """Send each held alert whose subject's interval has passed (all of
        them with ``everything``); returns how many were sent."""
        due: list[Alert] = []
        with self._lock:
            now = self.clock()
            for subject in list(self._held):
                if everything or now - self._last_sent.get(subject, -math.inf) >= self.config.min_interval_s:
                    alert, count = self._held.pop(subject)
                    self._last_sent[subject] = now
                    due.append(dict(alert, suppressed=count - 1) if count > 1 else alert)
        for alert in due:
            self._put(alert)
        return len(due)

    def _put(self, alert: Alert) -> None:
        for w in self._workers:
            w.put(alert)

    def _flush_loop(self) -> None:
        background_thread()
        assert self.flush_period_s is not None
        while not self._stop.wait(self.flush_period_s):
            if self._held:
                self.flush_due()

    def stats(self) -> dict[str, SinkStats]:
        return {w.sink.name: w.stats for w in self._workers}

    def close(self, timeout_s: float = 1.0) -> None:
        """Send what is held, then stop the threads (what is still queued
        after ``timeout_s`` is abandoned)."""
        self.flush_due(everything=True)
        for w in self._workers:
            with w.cond:
                w.closed = True
                w.cond.notify()
        deadline = time.monotonic() + timeout_s
        for w in self._workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
