"""Alerts that reach people, off the control path.

A violation or a gate decision becomes a small JSON document (an *alert*)
handed to :class:`AlertDispatcher`, which returns at once: each sink has its
own bounded queue and its own thread, so a sink that is down, slow or
failing never delays a hold, a verdict or another sink.  Per sink, an alert
is retried with exponential back-off; when a queue is full its oldest alert
is dropped and counted.  Alerts are deduplicated by key (one per violation
episode) and rate-limited per subject (a property, a gate limit): within
``min_interval_s`` of the last one sent for the same subject an alert is
suppressed, and the next one sent says how many were.

Sinks (:class:`AlertSink`): :class:`JsonLinesSink` (one JSON document per
line, appended) and :class:`WebhookSink` (HTTP POST of the document,
``Content-Type: application/json``; any status outside 2xx, a refused
connection or a timeout is a failure).  ``/diagnostics`` levels are the
nodes' own publishers.  Configured from YAML (:meth:`AlertConfig.from_mapping`),
e.g. in the supervisor's policy file::

    alerts:
      jsonl: /var/log/safemanip/alerts.jsonl
      webhook: {url: "http://127.0.0.1:8080/hook", timeout_s: 2.0}
      min_interval_s: 1.0
      queue: 256

Times in seconds.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
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
    """POSTs each alert as JSON to ``url``, waiting at most ``timeout_s``."""

    url: str
    timeout_s: float = 2.0
    name: str = 'webhook'

    def send(self, alert: Alert) -> None:
        request = urllib.request.Request(self.url, data=json.dumps(alert).encode(), method='POST',
                                         headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                if not 200 <= response.status < 300:
                    raise OSError(f'{self.url}: HTTP {response.status}')
        except urllib.error.HTTPError as exc:
            raise OSError(f'{self.url}: HTTP {exc.code}') from None


def _http_url(url: str) -> str | None:
    return None if url.startswith(('http://', 'https://')) else f'expected an http:// or https:// URL, got {url!r}'


ALERTS_SCHEMA = Field('map', keys={
    'jsonl': Field('str'),
    'webhook': Field('map', keys={'url': Field('str', required=True, check=_http_url),
                                  'timeout_s': Field('float', minimum=0.0)}),
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


class _Worker:
    """One sink's bounded queue and thread."""

    def __init__(self, sink: AlertSink, cfg: AlertConfig, sleep: Callable[[float], bool]) -> None:
        self.sink, self.cfg, self._sleep = sink, cfg, sleep
        self.queue: deque[Alert] = deque()
        self.stats = SinkStats()
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=f'alerts-{sink.name}', daemon=True)
        self.thread.start()

    def put(self, alert: Alert) -> None:
        with self.cond:
            if len(self.queue) >= self.cfg.queue:
                self.queue.popleft()
                self.stats.dropped += 1
            self.queue.append(alert)
            self.cond.notify()

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
                except Exception:          # any failure of a sink is its own: count it, back off, retry
                    if attempt == self.cfg.retries:
                        self.stats.failed += 1
                        break
                    self.stats.retries += 1
                    if self._sleep(delay):
                        return             # closed while backing off
                    delay = min(delay * 2, self.cfg.max_backoff_s)


@dataclass
class AlertDispatcher:
    """Hands alerts to every sink without blocking (module docstring)."""

    config: AlertConfig
    sinks: list[AlertSink] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._workers = [_Worker(s, self.config, self._stop.wait) for s in self.sinks]
        self._keys: dict[str, None] = {}
        self._last_sent: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: AlertConfig) -> 'AlertDispatcher':
        return cls(config, config.sinks())

    def submit(self, alert: Alert, key: str, subject: str) -> bool:
        """Queue ``alert`` for every sink and return at once; False when
        ``key`` was seen already or ``subject`` is rate-limited (counted, and
        reported as ``suppressed`` in the subject's next alert)."""
        if not self._workers:
            return False
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            while len(self._keys) > 100_000:
                self._keys.pop(next(iter(self._keys)))
            now = self.clock()
            last = self._last_sent.get(subject)
            if last is not None and now - last < self.config.min_interval_s:
                self._suppressed[subject] = self._suppressed.get(subject, 0) + 1
                return False
            self._last_sent[subject] = now
            suppressed = self._suppressed.pop(subject, 0)
        doc = dict(alert, suppressed=suppressed) if suppressed else alert
        for w in self._workers:
            w.put(doc)
        return True

    def stats(self) -> dict[str, SinkStats]:
        return {w.sink.name: w.stats for w in self._workers}

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the threads (what is still queued after ``timeout_s`` is abandoned)."""
        for w in self._workers:
            with w.cond:
                w.closed = True
                w.cond.notify()
        deadline = time.monotonic() + timeout_s
        for w in self._workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
