"""Auditing many recorded rollouts: per-source work fanned out over local
worker processes (default) or a Ray cluster, with results kept on disk.

Each input source (a bag or a trace file) is read, split into rollouts and
run through the same :class:`~safemanip_ros.monitor.core.Monitor` as the
live node.  Its result is written to ``OUT/episodes/<name>.json`` as soon as
it finishes; a source that fails is written to ``OUT/skipped/<name>.json``
with the reason, and the others go on.  Results do not depend on the engine
or the number of workers: sources are independent and the report is built
from the files in a fixed order.

Resume is content-addressed: each result file stores the key it was computed
under — a hash of the source's content (see :func:`source_fingerprint`), of
every configuration file's content (property suites, scene, robot
configuration, ontologies), of the options that change results and of the
package and compiler versions.  A re-run reuses a result only when its key
is unchanged; editing a formula, replacing a bag at the same path or
changing ``--rate-hz`` recomputes it.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import os
import secrets
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np

from ..atomic_file import write_text_atomically
from ..bag import is_bag
from ..errors import SafemanipError
from ..gc_pause import gc_paused
from ..memory import keep_freed_memory
from ..monitor.build import build_instances
from ..monitor.core import Monitor, RolloutResult
from ..settings import RATE_HZ, STALENESS_S
from ..spec.suite import Instance, InstanceSet
from .records import rollout_record, source_result, task_success
from .rollouts import SPLIT_SUFFIXES, AuditInputError, Rollout, discover, read_bag, read_jsonl
from .schema import RolloutRecord, SourceResult
from .stored import detached

if TYPE_CHECKING:
    from ..grounding.config import RobotConfig


@dataclass(frozen=True)
class AuditConfig:
    properties: tuple[str, ...]
    scene: str = ''
    robot_config: str = ''
    only: tuple[str, ...] = ()
    rate_hz: float = RATE_HZ.default
    staleness_s: float = STALENESS_S.default
    success: str = ''            # predicate meaning task success ('' = not reported)
    reduction: str = 'any'       # 'any' frame (lerobot-eval) or 'final' frame
    allow_unknown_predicates: bool = False   # traces and bags: ignore names the suite does not read
    strict: bool = False         # a property the configuration cannot ground is an error, not left out
    objects_from_images: bool = False   # object poses found again in recorded RGB-D images (camera.objects)

    def key(self) -> str:
        """Hash of the options and of the *content* of every file they name
        (plus the ontologies those load), and of the package and compiler
        versions: anything that can change a result."""
        from .. import __version__
        from ..ltlf.compiler import COMPILER_VERSION
        h = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode())
        h.update(f'|{__version__}|{COMPILER_VERSION}'.encode())
        for path in self.config_files():
            h.update(b'|' + str(path).encode() + b'|')
            h.update(_file_digest(path))
        return h.hexdigest()[:24]

    def config_files(self) -> list[Path]:
        """Every configuration file the monitor is built from."""
        from ..monitor.build import ontology_files
        files = [Path(p) for p in self.properties]
        files += [Path(p) for p in (self.scene, self.robot_config) if p]
        files += ontology_files(self.robot_config)
        return sorted(set(files))


def _file_digest(path: Path) -> bytes:
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return b'missing'


_EDGE_BYTES = 1 << 16


def source_fingerprint(path: Path) -> str:
    """A hash of a source's content, cheap enough for many large bags: the
    full bytes of ``metadata.yaml`` (or of a .jsonl trace), and for every
    other file of a bag its name, size, modification time and its first and
    last 64 KiB — so a bag replaced at the same path (even with the same
    size and times) gets a new fingerprint."""
    h = hashlib.sha256()
    try:
        for f in _files_of(path):
            st = f.stat()
            h.update(f'|{f.relative_to(path) if path.is_dir() else f.name}|{st.st_size}|{st.st_mtime_ns}|'.encode())
            if not stat.S_ISREG(st.st_mode):
                continue         # a pipe would block the read; reading the source refuses it, naming it
            if f.name == 'metadata.yaml' or f.suffix == '.jsonl' or st.st_size <= 2 * _EDGE_BYTES:
                h.update(_file_digest(f))
            else:
                with f.open('rb') as fh:
                    h.update(fh.read(_EDGE_BYTES))
                    fh.seek(-_EDGE_BYTES, os.SEEK_END)
                    h.update(fh.read(_EDGE_BYTES))
    except OSError as err:       # missing or unreadable: keyed by the error; reading it reports why
        return hashlib.sha256(f'unreadable|{path}|{err}'.encode()).hexdigest()[:24]
    return h.hexdigest()[:24]


def _monitor(cfg: AuditConfig) -> Monitor:
    """The configuration's monitor, built once per process and per *content*
    of its files (``cfg.key()``): an edited suite or robot configuration is
    rebuilt, an unchanged one is not.  Shared: :func:`audit_sources` resizes
    it to each batch (:meth:`Monitor.resize`; a run starts from reset)."""
    return _built_monitor(cfg.key(), cfg)


@functools.lru_cache(maxsize=8)
def _built_monitor(content_key: str, cfg: AuditConfig) -> Monitor:
    return Monitor(_instances(content_key, cfg))


@functools.lru_cache(maxsize=8)
def _instances(content_key: str, cfg: AuditConfig) -> InstanceSet:
    """The property instances (loading the suites costs ~0.3 s), shared by
    the monitors of every batch size."""
    return build_instances(list(cfg.properties), cfg.scene, cfg.robot_config, list(cfg.only), cfg.rate_hz,
                           strict=cfg.strict)


def unsupported_instances(cfg: AuditConfig) -> dict[str, tuple[str, ...]]:
    """Instances this configuration cannot ground (not run), with the missing predicates."""
    return dict(_monitor(cfg).unsupported)


@functools.lru_cache(maxsize=4)
def _robot(path: str) -> RobotConfig | None:
    if not path:
        return None
    from ..grounding.config import load_robot_config
    return load_robot_config(path)


def _rollouts_of(path: str, cfg: AuditConfig, predicates: list[str], suite_reads: list[str],
                 known: frozenset[str] = frozenset()) -> list[Rollout]:
    """The rollouts of one source, framed over ``predicates`` (the suite's, then the success predicate);
    ``known``: the suite's other names (properties ``--only`` left out read them), never unknown."""
    p = Path(path)
    if not p.exists():
        raise AuditInputError(f'{path}: no such file or folder' + (' (a broken link)' if p.is_symlink() else ''))
    if is_bag(p):
        return read_bag(p, predicates, cfg.rate_hz, cfg.staleness_s, _robot(cfg.robot_config),
                        allow_unknown=cfg.allow_unknown_predicates, suite_reads=suite_reads, known=known,
                        objects_from_images=cfg.objects_from_images)
    if p.is_file() and p.suffix == '.jsonl':
        return read_jsonl(p, predicates, cfg.allow_unknown_predicates, known)
    if not (p.is_file() or p.is_dir()):
        raise AuditInputError(f'{path}: not a regular file or folder (a pipe, socket or device): give the trace '
                              f'as a file')
    if p.is_dir():
        try:
            names = [f.suffix for f in p.iterdir()]
        except OSError as err:
            raise AuditInputError(f'{path}: cannot read the folder ({err.strerror or err})') from None
        if any(suffix in SPLIT_SUFFIXES for suffix in names):
            raise AuditInputError(f'{path}: a recording without metadata.yaml (did it finish?); its split files '
                                  f'cannot be read without it')
    raise AuditInputError(f'{path}: not a rosbag2 bag (no metadata.yaml) nor a .jsonl trace')


def audit_sources(paths: list[str], cfg: AuditConfig,
                  store: tuple[str, dict[str, tuple[str, str | None]]] | None = None,
                  detach_timelines: bool = False) -> list[tuple[str, SourceResult | None, str | None]]:
    """Monitor every rollout of several sources in one batch (one numpy
    operation steps all of them); per source a result or the reason it
    failed.  ``store``: (output folder, path → (file name, result key)):
    results are also written there, as :func:`run_audit` would (a local
    worker writes its own, in parallel with the others).  A key given as
    None is computed here, from the source as it is before it is read.
    ``detach_timelines`` (with ``store``): the results returned refer to
    their files for their per-frame fields (:func:`.stored.detached`)."""
    keep_freed_memory()     # here too: a Ray worker is a process of its own
    # The configuration's content hashed once a task (it reads every configuration file): the
    # monitor and the keys its results are stored under then come from the same content.
    cfg_key = cfg.key()
    mon = _built_monitor(cfg_key, cfg)
    predicates = list(mon.predicates)
    extra = [cfg.success] if cfg.success and cfg.success not in predicates else []
    out: list[tuple[str, SourceResult | None, str | None]] = []
    loaded: list[tuple[str, list[Rollout]]] = []
    keys = _filled_keys({p: store[1][p] for p in paths}, cfg, cfg_key) if store is not None else {}
    for path in paths:
        try:
            loaded.append((path, _rollouts_of(path, cfg, predicates + extra, predicates, mon.known_predicates)))
        except SafemanipError as err:   # bad input: reported with the path, the batch goes on
            out.append((path, None, err.one_line()))
        # Anything else is a bug in our code, not a "corrupt bag": it propagates.
    rollouts = [ep for _, eps in loaded for ep in eps]
    summaries: list[RolloutRecord] = []
    if rollouts:
        n_pred = len(predicates)
        B, T = len(rollouts), max(ep.values.shape[0] for ep in rollouts)
        values = np.zeros((B, T, n_pred), bool)
        unknown = np.zeros((B, T, n_pred), bool)
        for b, ep in enumerate(rollouts):
            values[b, :ep.values.shape[0]] = ep.values[:, :n_pred]
            unknown[b, :ep.values.shape[0]] = ep.unknown[:, :n_pred]
        if mon.batch != B:
            mon.resize(B)
        results = mon.run(values, unknown, [ep.values.shape[0] for ep in rollouts], keep_verdicts=True)
        for ep, res in zip(rollouts, results):
            summaries.append(rollout_record(ep, res, predicates, _success(ep, n_pred, predicates, cfg)))
    k = 0
    for path, eps in loaded:
        result = source_result(path, summaries[k:k + len(eps)])
        k += len(eps)
        if store is not None:
            name, key = keys[path]
            file = _store_result(Path(store[0]), name, key, result)
            if detach_timelines:
                result = detached(result, file, key)
        out.append((path, result, None))
    return out


def _filled_keys(keys: dict[str, tuple[str, str | None]], cfg: AuditConfig,
                 cfg_key: str | None = None) -> dict[str, tuple[str, str]]:
    """(file name, result key) per source, a key given as None computed now,
    from the source as it is before it is read (and ``cfg_key``, else
    ``cfg.key()``)."""
    if cfg_key is None:
        cfg_key = cfg.key() if any(key is None for _, key in keys.values()) else ''
    return {p: (name, key if key is not None else _result_key(Path(p), cfg_key)) for p, (name, key) in keys.items()}


def _chunk_store(out: Path, keys: dict[str, tuple[str, str | None]],
                 chunk: list[str]) -> tuple[str, dict[str, tuple[str, str | None]]]:
    """:func:`audit_sources`' ``store`` for a chunk: the output folder and its sources' (file name, key)."""
    return str(out), {p: keys[p] for p in chunk}


def _store_result(out: Path, name: str, key: str, result: SourceResult) -> Path:
    """A source's result as ``out/episodes/<name>.json`` (returned), with
    the key a resumed audit checks."""
    path = out / 'episodes' / f'{name}.json'
    _write_json(path, {**result, 'key': key})
    return path


def monitored_rollouts(path: str, cfg: AuditConfig) -> tuple[list[Instance], list[tuple[Rollout, RolloutResult]]]:
    """The instances monitored and every rollout of one source with its
    result, per-frame verdicts kept: what :func:`audit_sources` computes
    for its records, for a reader of the frames themselves (the Foxglove
    export).  Bad input raises the :class:`AuditInputError` the audit
    reports for the source."""
    mon = _monitor(cfg)
    predicates = list(mon.predicates)
    rollouts = _rollouts_of(path, cfg, predicates, predicates, mon.known_predicates)
    out = []
    for ep in rollouts:
        if mon.batch != 1:
            mon.resize(1)
        (result,) = mon.run(ep.values[None, :, :len(predicates)], ep.unknown[None, :, :len(predicates)],
                            [ep.values.shape[0]], keep_verdicts=True)
        out.append((ep, result))
    return list(mon.instances), out


def audit_source(path: str, cfg: AuditConfig) -> SourceResult:
    """Monitor every rollout of one source; a JSON-ready result."""
    [(_, result, reason)] = audit_sources([path], cfg)
    if result is None:
        raise AuditInputError(reason)
    return result


def _success(ep: Rollout, n_pred: int, predicates: list[str], cfg: AuditConfig) -> tuple[bool | None, bool]:
    """:func:`~.records.task_success` of the configured success predicate
    (a column after the suite's, when the suite does not read it)."""
    if not cfg.success:
        return None, False
    return task_success(ep, n_pred if ep.values.shape[1] > n_pred else predicates.index(cfg.success), cfg.reduction)


def source_name(path: Path) -> str:
    """The result file's name: one per source path (the key inside says
    what it was computed from)."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return f'{path.name[:40]}-{digest}'


def _result_key(path: Path, cfg_key: str) -> str:
    return hashlib.sha256(f'{cfg_key}|{source_fingerprint(path)}'.encode()).hexdigest()[:24]


def _stored_result(path: Path) -> SourceResult | None:
    """The result stored at ``path`` with its key, or None (none, or
    unreadable or torn: recomputed)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return cast(SourceResult, data) if isinstance(data, dict) and isinstance(data.get('key'), str) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    # One C-encoder call, not json.dump's chunks.
    write_text_atomically(path, [json.dumps(data, separators=(',', ':'))])


CHUNK = 64
"""Most sources per task: their rollouts are monitored together as one batch
(one numpy step serves them all).  Results are written per finished task, so
this bounds the work an interruption can lose."""

TASKS_PER_WORKER = 2
"""With several workers, each task takes about 1/(TASKS_PER_WORKER x
workers) of the bytes still to audit (see :func:`plan_tasks`)."""


def plan_tasks(sizes: list[int], workers: int) -> list[list[int]]:
    """The audit's tasks: lists of indices into ``sizes`` (each source's
    bytes on disk, the proxy for its work), every index once.

    Largest sources first, and a task's sources of similar size, so the
    rollouts batched together are padded little to the longest.  One worker:
    near-equal tasks of at most :data:`CHUNK` sources.  Several: guided
    self-scheduling, as OpenMP's ``guided``: each task takes about
    1/(:data:`TASKS_PER_WORKER` x ``workers``) of the bytes still left (at
    most :data:`CHUNK` sources, at least one), so tasks shrink towards the
    end and, handed out in order to whichever worker is free, the workers
    finish within about one small task of each other.  Equal tasks, one per
    worker, leave one worker idle for whatever the other was slowed down by;
    three equal tasks on two workers take two tasks' time for 1.5x."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])     # stable: equal sizes keep their order
    if not order:
        return []
    if workers <= 1:
        n = -(-len(order) // CHUNK)
        return [order[k * len(order) // n:(k + 1) * len(order) // n] for k in range(n)]
    tasks: list[list[int]] = []
    left = sum(sizes)
    i = 0
    while i < len(order):
        share = left / (TASKS_PER_WORKER * workers)
        task = [order[i]]
        taken = sizes[order[i]]
        i += 1
        while i < len(order) and len(task) < CHUNK and taken + sizes[order[i]] <= share:
            task.append(order[i])
            taken += sizes[order[i]]
            i += 1
        tasks.append(task)
        left -= taken
    return tasks


def _files_of(path: Path) -> list[Path]:
    """A source's files in path order: the source itself if it is no folder,
    else every file under it (a linked file as what it points to; a linked
    folder, which could loop, is not entered, as ``Path.rglob`` does not)."""
    if not path.is_dir():
        return [path]
    out: list[Path] = []
    folders = [path]
    while folders:
        for entry in os.scandir(folders.pop()):
            if entry.is_dir(follow_symlinks=False):
                folders.append(Path(entry.path))
            elif entry.is_file():
                out.append(Path(entry.path))
    return sorted(out)


def _source_bytes(path: str) -> int:
    """A source's bytes on disk (every file of a bag), 0 where it cannot be
    read (its worker reports why)."""
    try:
        return sum(f.stat().st_size for f in _files_of(Path(path)))
    except OSError:
        return 0


def run_audit(inputs: list[str], cfg: AuditConfig, out_dir: str | Path, workers: int = 1, engine: str = 'local',
              ray_address: str | None = None, progress: Callable[[int, int], None] | None = None,
              detach_timelines: bool = False,
              notes: list[str] | None = None) -> tuple[list[SourceResult], list[dict[str, str]]]:
    """Audit every source under ``inputs``; returns (results, skipped) in input order.

    A source found twice (named twice, or under two names: a link, ``./x``
    and ``x/``) is audited once, at its first place; ``notes`` gets a line
    for each repeat.

    ``detach_timelines``: each rollout's per-frame fields (``predicates``,
    ``verdicts``, ``timeline_svg``) are :class:`~.stored.StoredField`
    references into its result file, not values, so memory does not grow
    with them (see :mod:`.stored`); the report functions read through them."""
    keep_freed_memory()     # before the first bag's buffers; forked workers inherit it
    out = Path(out_dir)
    labelled: list[tuple[Path, str]] = []
    first_of: dict[str, Path] = {}         # real path → where it was found first
    for arg in inputs:
        for src in discover([arg]):
            real = os.path.realpath(src)
            if real in first_of:
                if notes is not None:
                    notes.append(f'{src} is {first_of[real]} again: audited once')
                continue
            first_of[real] = src
            labelled.append((src, Path(arg).name if len(inputs) > 1 else ''))
    _monitor(cfg)   # configuration errors stop here, before any work
    cfg_key = cfg.key()
    todo = []
    # source → (file name, content key).  A source with no stored result is fingerprinted by the
    # worker that reads it (in parallel, not here, one after another), just before reading it.
    keys: dict[str, tuple[str, str | None]] = {}
    reused: dict[str, SourceResult] = {}       # source → its stored result, read once, here
    with gc_paused():
        for src, _ in labelled:
            name = source_name(src)
            ep_file = out / 'episodes' / f'{name}.json'
            stored = _stored_result(ep_file)
            key = _result_key(src, cfg_key) if stored is not None else None
            keys[str(src)] = (name, key)
            if stored is not None and key is not None and stored.pop('key') == key:
                reused[str(src)] = detached(stored, ep_file, key) if detach_timelines else stored
            else:
                todo.append(str(src))
    for stale in (out / 'skipped').glob('*.json') if (out / 'skipped').is_dir() else []:
        stale.unlink()      # skipped sources are retried on every run
    done = len(labelled) - len(todo)
    if progress:
        progress(done, len(labelled))

    computed: dict[str, SourceResult] = {}     # this run's results, not read back from their files

    def record(path: str, result: SourceResult | None, reason: str | None, written: bool = False,
               key: str | None = None) -> None:
        """A source's outcome; ``written``: its file is already written, else
        ``key`` (or the one computed up front) is what it is stored under."""
        nonlocal done
        name, known = keys[path]
        if result is not None:
            if not written:
                key = key or known
                assert key is not None      # a worker that does not write returns the key it computed
                file = _store_result(out, name, key, result)
                if detach_timelines:
                    result = detached(result, file, key)
            computed[path] = result
        else:
            (out / 'episodes' / f'{name}.json').unlink(missing_ok=True)   # an older result is stale now
            _write_json(out / 'skipped' / f'{name}.json', {'source': path, 'reason': reason})
        done += 1
        if progress:
            progress(done, len(labelled))

    chunks = [[todo[i] for i in task] for task in plan_tasks([_source_bytes(p) for p in todo], workers)]
    with _heap_frozen():
        _compute(chunks, cfg, out, keys, record, workers, engine, ray_address, detach_timelines)
    results: list[SourceResult] = []
    skipped: list[dict[str, str]] = []
    for src, label in labelled:
        name, key = keys[str(src)]
        sk_file = out / 'skipped' / f'{name}.json'
        if str(src) in computed:
            results.append({**computed[str(src)], 'policy': label})
        elif str(src) in reused:
            results.append({**reused[str(src)], 'policy': label})
        elif sk_file.exists():
            skipped.append(json.loads(sk_file.read_text()))
    return results, skipped


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """The objects alive before the audit (the compiled suite, the modules)
    moved out of the cyclic collector's reach while it runs (``gc.freeze``):
    its full passes, set off by the many small objects results are made of,
    then traverse only what the audit made — in this process and in forked
    workers, whose passes would otherwise also copy every page of the
    inherited heap they touch.  A 2-worker audit of the predicate bags ran
    about 13 % faster.  Left as it is when something else froze objects."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_RAY_MARK = '.ray-audit-'
"""Name prefix of the mark a Ray audit leaves in its output folder while it runs."""


def _ray_chunk(chunk: list[str], cfg: AuditConfig, out: str, keys: dict[str, tuple[str, str | None]],
               token: str, detach_timelines: bool = False
               ) -> tuple[bool, list[tuple[str, SourceResult | None, str | None, str | None]]]:
    """A Ray task: :func:`audit_sources` on a worker.  Where the worker sees
    the audit's output folder (the driver's mark for this run is there), it
    writes the results itself, as a local worker does; elsewhere it
    fingerprints each source before reading it and returns the results with
    their keys for the driver to write.  Returns (written, outcomes)."""
    if (Path(out) / f'{_RAY_MARK}{token}').exists():
        return True, [(p, r, why, None) for p, r, why in audit_sources(chunk, cfg, (out, keys), detach_timelines)]
    filled = _filled_keys(keys, cfg)
    return False, [(p, r, why, filled[p][1]) for p, r, why in audit_sources(chunk, cfg)]


def _compute(chunks: list[list[str]], cfg: AuditConfig, out: Path, keys: dict[str, tuple[str, str | None]],
             record: Callable[..., None], workers: int, engine: str, ray_address: str | None,
             detach_timelines: bool = False) -> None:
    """Audit ``chunks`` of sources on ``engine``; ``record`` takes each
    source's (path, result, reason[, written[, key]])."""
    if engine == 'ray':
        try:
            import ray
        except ImportError as err:
            raise SafemanipError('the Ray engine needs ray: pip install "safemanip_ros[ray]"') from err
        if not ray.is_initialized():
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
                     num_cpus=None if ray_address else max(1, workers))
        # Workers that see this folder (a local cluster, a shared file system) write their results
        # themselves, as local workers do; the mark tells them.  Others return each result's key.
        token = secrets.token_hex(8)
        mark = out / f'{_RAY_MARK}{token}'
        out.mkdir(parents=True, exist_ok=True)
        mark.touch()
        try:
            remote = ray.remote(_ray_chunk)
            pending = [remote.remote(chunk, cfg, *_chunk_store(out, keys, chunk), token, detach_timelines)
                       for chunk in chunks]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                written, outcomes = ray.get(ready[0])
                for path, result, reason, key in outcomes:
                    record(path, result, reason, written, key)
        finally:
            mark.unlink(missing_ok=True)
    elif engine != 'local':
        raise SafemanipError(f'unknown engine {engine!r}; choose local or ray')
    elif workers <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            for path, result, reason in audit_sources(chunk, cfg, _chunk_store(out, keys, chunk), detach_timelines):
                record(path, result, reason, written=True)
    else:
        _fan_out(chunks, cfg, out, keys, record, workers, detach_timelines)


def _fan_out(chunks: list[list[str]], cfg: AuditConfig, out: Path, keys: dict[str, tuple[str, str | None]],
             record: Callable[..., None], workers: int, detach_timelines: bool = False) -> None:
    """Audit ``chunks`` in this process and ``workers - 1`` forked ones.

    The parent is a worker too: it would otherwise only wait, one process
    fewer is forked, and its own results are not pickled back through a pipe
    (about 40 ms for 20 predicate bags' results).  Chunks are taken in order
    (:func:`plan_tasks` puts the large ones first) by whichever worker is
    free: while more chunks are left than workers, every child has one
    queued behind the one it runs, so it does not wait for the parent to
    hand it the next; the parent takes the next one itself whenever it is
    free.  Every worker writes its results' files itself (in parallel); the
    parent records the rest."""
    queue = deque(chunks)
    children = workers - 1
    running: set[Future[Any]] = set()

    def collect(done: Iterable[Future[Any]]) -> None:
        for fut in done:
            running.discard(fut)
            for path, result, reason in fut.result():
                record(path, result, reason, written=True)

    with ProcessPoolExecutor(max_workers=children, mp_context=get_context('fork')) as pool:
        while queue or running:
            # A second chunk queued behind a child's only while there are more left than workers.
            while queue and (len(running) < children or (len(running) < 2 * children and len(queue) > workers)):
                chunk = queue.popleft()
                running.add(pool.submit(audit_sources, chunk, cfg, _chunk_store(out, keys, chunk), detach_timelines))
            if queue:
                chunk = queue.popleft()
                for path, result, reason in audit_sources(chunk, cfg, _chunk_store(out, keys, chunk),
                                                          detach_timelines):
                    record(path, result, reason, written=True)
                collect([fut for fut in running if fut.done()])
            else:
                collect(wait(running, return_when=FIRST_COMPLETED).done)
