"""Auditing many recorded rollouts: per-source work fanned out over local
worker processes (default) or a Ray cluster, with results kept on disk.

Each input source (a bag or a trace file) is read, split into episodes and
run through the same :class:`~safemanip_ros.monitor.core.Monitor` as the
live node.  Its result is written to ``OUT/episodes/<key>.json`` as soon as
it finishes; a source that fails is written to ``OUT/skipped/<key>.json``
with the reason, and the others go on.  A re-run with the same
configuration reuses finished results (resume).  Results do not depend on
the engine or the number of workers: sources are independent and the report
is built from the files in a fixed order.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import SafemanipError
from ..monitor.build import build_monitor
from ..monitor.core import Monitor
from .episodes import AuditInputError, Episode, discover, is_bag, read_bag, read_jsonl



@dataclass(frozen=True)
class AuditConfig:
    properties: tuple[str, ...]
    scene: str = ''
    robot_config: str = ''
    only: tuple[str, ...] = ()
    rate_hz: float = 20.0
    staleness_s: float = 0.25
    success: str = ''            # predicate meaning task success ('' = not reported)
    reduction: str = 'any'       # 'any' frame (lerobot-eval) or 'final' frame

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=8)
def _monitor(cfg: AuditConfig, batch: int = 1) -> Monitor:
    return build_monitor(list(cfg.properties), cfg.scene, cfg.robot_config, list(cfg.only), cfg.rate_hz, batch=batch)


@functools.lru_cache(maxsize=4)
def _robot(path: str):
    if not path:
        return None
    from ..grounding.config import load_robot_config
    return load_robot_config(path)


def _episodes_of(path: str, cfg: AuditConfig, predicates: list[str]) -> list[Episode]:
    p = Path(path)
    if is_bag(p):
        return read_bag(p, predicates, cfg.rate_hz, cfg.staleness_s, _robot(cfg.robot_config))
    if p.is_file() and p.suffix == '.jsonl':
        return read_jsonl(p, predicates)
    raise AuditInputError(f'{path}: not a rosbag2 bag (no metadata.yaml) nor a .jsonl trace')


def audit_sources(paths: list[str], cfg: AuditConfig) -> list[tuple[str, dict | None, str | None]]:
    """Monitor every episode of several sources in one batch (one numpy
    operation steps all of them); per source a result or the reason it failed."""
    predicates = list(_monitor(cfg).predicates)
    extra = [cfg.success] if cfg.success and cfg.success not in predicates else []
    out: list[tuple[str, dict | None, str | None]] = []
    loaded: list[tuple[str, list[Episode]]] = []
    for path in paths:
        try:
            loaded.append((path, _episodes_of(path, cfg, predicates + extra)))
        except SafemanipError as err:
            out.append((path, None, err.one_line()))
        except Exception as err:    # keep the batch going; the reason is reported with the path
            out.append((path, None, f'{path}: {type(err).__name__}: {err}'))
    episodes = [ep for _, eps in loaded for ep in eps]
    summaries: list[dict] = []
    if episodes:
        n_pred = len(predicates)
        B, T = len(episodes), max(ep.values.shape[0] for ep in episodes)
        values = np.zeros((B, T, n_pred), bool)
        unknown = np.zeros((B, T, n_pred), bool)
        for b, ep in enumerate(episodes):
            values[b, :ep.values.shape[0]] = ep.values[:, :n_pred]
            unknown[b, :ep.values.shape[0]] = ep.unknown[:, :n_pred]
        mon = _monitor(cfg, B)
        results = mon.run(values, unknown, [ep.values.shape[0] for ep in episodes], keep_verdicts=True)
        for ep, res in zip(episodes, results):
            summaries.append({'name': ep.name, 'frames': res.frames, 'success': _success(ep, n_pred, predicates, cfg),
                              'instances': [r.to_dict() for r in res.instances],
                              'predicates': _predicate_intervals(ep, res, predicates),
                              'verdicts': _verdict_runs(res)})
    k = 0
    for path, eps in loaded:
        out.append((path, {'source': path, 'episodes': summaries[k:k + len(eps)]}, None))
        k += len(eps)
    return out


def audit_source(path: str, cfg: AuditConfig) -> dict:
    """Monitor every episode of one source; a JSON-ready result."""
    [(_, result, reason)] = audit_sources([path], cfg)
    if result is None:
        raise AuditInputError(reason)
    return result


def _predicate_intervals(ep: Episode, res, predicates: list[str]) -> dict[str, dict[str, list[list[int]]]]:
    """For the timelines: the [start, end] frame runs (inclusive) where each
    grounded predicate read by a violated instance was true, and where it was
    unknown."""
    wanted = sorted({p for r in res.instances if r.violations for p in r.unknown_by_predicate})
    out: dict[str, dict[str, list[list[int]]]] = {}
    for name in wanted:
        j = predicates.index(name)
        out[name] = {'true': _runs(ep.values[:, j] & ~ep.unknown[:, j]), 'unknown': _runs(ep.unknown[:, j])}
    return out


def _verdict_runs(res) -> dict[str, list[list[int]]]:
    """For the timelines: [start, end, verdict code] runs of the main verdict
    of each instance that was violated."""
    out = {}
    for d, r in enumerate(res.instances):
        if not r.violations:
            continue
        v = res.verdicts[:, d]
        change = np.flatnonzero(np.diff(v)) + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change - 1, [v.size - 1]])
        out[r.instance] = [[int(a), int(b), int(v[a])] for a, b in zip(starts, ends)]
    return out


def _runs(series: np.ndarray) -> list[list[int]]:
    padded = np.concatenate([[0], series.astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(padded))
    return [[int(a), int(b) - 1] for a, b in zip(edges[::2], edges[1::2])]


def _success(ep: Episode, n_pred: int, predicates: list[str], cfg: AuditConfig) -> bool | None:
    if not cfg.success:
        return None
    j = n_pred if ep.values.shape[1] > n_pred else predicates.index(cfg.success)
    col = ep.values[:, j] & ~ep.unknown[:, j]
    if cfg.reduction == 'any':
        return bool(col.any())
    return bool(col[-1]) if col.size else False


def _key(path: Path, cfg: AuditConfig) -> str:
    digest = hashlib.sha256(f'{path.resolve()}|{cfg.key()}'.encode()).hexdigest()[:16]
    return f'{path.name[:40]}-{digest}'


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix='.tmp')
    with os.fdopen(fd, 'w') as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


CHUNK = 16
"""Most sources per task: their episodes are monitored together as one batch
(one numpy step serves them all).  Results are written per finished task, so
this bounds the work an interruption can lose."""


def run_audit(inputs: list[str], cfg: AuditConfig, out_dir: str | Path, workers: int = 1, engine: str = 'local',
              ray_address: str | None = None, progress: Callable[[int, int], None] | None = None
              ) -> tuple[list[dict], list[dict]]:
    """Audit every source under ``inputs``; returns (results, skipped) in input order."""
    out = Path(out_dir)
    labelled: list[tuple[Path, str]] = []
    for arg in inputs:
        for src in discover([arg]):
            labelled.append((src, Path(arg).name if len(inputs) > 1 else ''))
    _monitor(cfg)   # configuration errors stop here, before any work
    todo = []
    for src, _ in labelled:
        key = _key(src, cfg)
        if not (out / 'episodes' / f'{key}.json').exists():
            todo.append((str(src), key))
    for stale in (out / 'skipped').glob('*.json') if (out / 'skipped').is_dir() else []:
        stale.unlink()      # skipped sources are retried on every run
    done = len(labelled) - len(todo)
    if progress:
        progress(done, len(labelled))

    def record(path: str, key: str, result: dict | None, reason: str | None) -> None:
        nonlocal done
        if result is not None:
            _write_json(out / 'episodes' / f'{key}.json', result)
        else:
            _write_json(out / 'skipped' / f'{key}.json', {'source': path, 'reason': reason})
        done += 1
        if progress:
            progress(done, len(labelled))

    keys = dict(todo)
    # Near-equal chunks of at most CHUNK sources, at least one per worker.
    n_chunks = max(min(len(todo), max(1, workers)), -(-len(todo) // CHUNK)) if todo else 0
    chunks = [[p for p, _ in todo[i::n_chunks]] for i in range(n_chunks)]
    if engine == 'ray':
        try:
            import ray
        except ImportError as err:
            raise SafemanipError('the Ray engine needs ray: pip install "safemanip_ros[ray]"') from err
        if not ray.is_initialized():
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
                     **({} if ray_address else {'num_cpus': max(1, workers)}))
        remote = ray.remote(audit_sources)
        pending = [remote.remote(chunk, cfg) for chunk in chunks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for path, result, reason in ray.get(ready[0]):
                record(path, keys[path], result, reason)
    elif engine != 'local':
        raise SafemanipError(f'unknown engine {engine!r}; choose local or ray')
    elif workers <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            for path, result, reason in audit_sources(chunk, cfg):
                record(path, keys[path], result, reason)
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context('fork')) as pool:
            futures = [pool.submit(audit_sources, chunk, cfg) for chunk in chunks]
            for fut in as_completed(futures):
                for path, result, reason in fut.result():
                    record(path, keys[path], result, reason)
    results, skipped = [], []
    for src, label in labelled:
        key = _key(src, cfg)
        ep_file, sk_file = out / 'episodes' / f'{key}.json', out / 'skipped' / f'{key}.json'
        if ep_file.exists():
            data = json.loads(ep_file.read_text())
            data['policy'] = label
            results.append(data)
        elif sk_file.exists():
            skipped.append(json.loads(sk_file.read_text()))
    return results, skipped

