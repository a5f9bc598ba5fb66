"""Recording off the control path: a bounded queue in front of a
:class:`~safemanip_ros.bag.writer.SplitBagWriter`, drained by its own
thread.

``put`` never blocks (a full queue drops the message and counts it), so a
slow disk, a split rotation or a metadata rewrite never delays grounding,
the monitor or the supervisor: in ``safemanip run`` they share one executor
with the recorder's subscriptions, which now only enqueue bytes.  ``close``
drains the queue, closes the open split and lists every split in
``metadata.yaml`` (SIGINT/SIGTERM lose nothing; SIGKILL loses at most the
open split, ``split_s``).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..realtime import background_thread
from .writer import SplitBagWriter


@dataclass
class RecorderStats:
    """Counts since the recorder started (``max_write_s``: the longest single
    write or rotation on the recorder thread, seconds)."""

    queued: int = 0
    written: int = 0
    dropped: int = 0
    max_write_s: float = 0.0
    errors: int = 0


class ThreadedRecorder:
    """``writer`` gets its topics added before :meth:`start`; ``now_ns``
    (default wall time) decides when an idle split is rotated."""

    def __init__(self, writer: SplitBagWriter, queue_size: int = 10000,
                 now_ns: Callable[[], int] = time.time_ns, rotate_period_s: float = 0.25) -> None:
        self.writer = writer
        self.stats = RecorderStats()
        self._queue: queue.Queue[tuple[str, int, bytes] | None] = queue.Queue(maxsize=queue_size)
        self._now_ns = now_ns
        self._rotate_period_s = rotate_period_s
        self._thread = threading.Thread(target=self._run, name=f'recorder {writer.path}', daemon=True)
        self._closed = False
        self.last_error: str = ''

    def start(self) -> 'ThreadedRecorder':
        self._thread.start()
        return self

    def put(self, topic: str, stamp_ns: int, raw: bytes) -> bool:
        """Enqueue one serialized message; False (and counted) when the queue is full or closed."""
        if self._closed:
            self.stats.dropped += 1
            return False
        try:
            self._queue.put_nowait((topic, stamp_ns, bytes(raw)))
        except queue.Full:
            self.stats.dropped += 1
            return False
        self.stats.queued += 1
        return True

    def close(self, timeout_s: float = 30.0) -> RecorderStats:
        """Write what is queued, close the bag (every split listed), stop the thread."""
        if not self._closed:
            self._closed = True
            if self._thread.is_alive():
                self._queue.put(None, timeout=timeout_s)     # the thread drains the queue first
                self._thread.join(timeout_s)
            else:
                self._drain()
                self._timed(self.writer.close)
        return self.stats

    # --------------------------------------------------------------- thread
    def _timed(self, fn: Callable[..., None], *args: object) -> None:
        t0 = time.perf_counter()
        try:
            fn(*args)
        except Exception as err:      # a disk error must not kill the thread silently: counted, kept
            self.stats.errors += 1
            self.last_error = f'{type(err).__name__}: {err}'
        self.stats.max_write_s = max(self.stats.max_write_s, time.perf_counter() - t0)

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._timed(self.writer.write, *item)
                self.stats.written += 1

    def _run(self) -> None:
        background_thread()         # never competes with a real-time control path
        last_rotate = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=self._rotate_period_s)
                idle = False
            except queue.Empty:
                item, idle = None, True
            if item is None and not idle:
                break
            if item is not None:
                self._timed(self.writer.write, *item)
                self.stats.written += 1
            if time.monotonic() - last_rotate >= self._rotate_period_s:
                last_rotate = time.monotonic()
                self._timed(self.writer.rotate_if_due, self._now_ns())
        self._drain()
        self._timed(self.writer.close)
