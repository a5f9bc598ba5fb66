"""Recorded rollouts as proposition trajectories, grouped by seed.

Inputs (files, or folders searched for them):

* a JSONL proposition trace (``safemanip check``'s format): one step per
  line (a list of the true propositions, or an object of booleans), or a
  batch, one whole trajectory per line (a JSON array of steps);
* a rollout log of :class:`safemanip_ros.gym.SpecMonitor` (one JSON object
  per rollout: ``{"propositions": [[...], ...], "seed": ..., "spec": ...}``);
* a rosbag2 of ``safemanip_ros/PredicateArray`` (the monitor's inputs, as
  recorded by ``safemanip run`` or a trace player), read on the audit's
  frame clock; a trajectory with an unknown proposition is skipped and said
  so (SpecRLBench's propositions are never unknown).

The seed of a trajectory is its record's ``seed`` where it has one, else
the name of the input given (a file's stem, a folder's name): lay rollouts
out as ``seed_1/``, ``seed_11/``, ... and name the folders.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SafemanipError, TraceError
from ..ltlf.trace import Step, read_step_traces

ROLLOUT_LOG_KEY = 'propositions'


@dataclass(frozen=True)
class Trajectory:
    """One rollout: the propositions true after each step."""

    seed: str
    steps: tuple[Step, ...]
    source: str
    spec: str = ''         # the specification it was rolled out for ('': any) ...
    formula: str = ''      # ... and its formula, where known


def _first_object(path: Path) -> dict[str, object] | None:
    try:
        with path.open(encoding='utf-8') as fh:
            for line in fh:
                if line.strip():
                    value = json.loads(line)
                    return value if isinstance(value, dict) else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None      # read_step_traces names the problem
    return None


def _rollout_log(path: Path, seed: str) -> list[Trajectory]:
    out = []
    with path.open(encoding='utf-8') as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise TraceError(f'{path}:{n}: invalid JSON: {err.msg} at column {err.colno}') from err
            steps = rec.get(ROLLOUT_LOG_KEY) if isinstance(rec, dict) else None
            if not isinstance(steps, list) or not all(isinstance(s, list) and all(isinstance(a, str) for a in s)
                                                      for s in steps):
                raise TraceError(f'{path}:{n}: a rollout log line needs "propositions": a list of lists of names')
            if not steps:
                continue          # a rollout that ended at reset has no step
            out.append(Trajectory(str(rec.get('seed', seed)), tuple(frozenset(s) for s in steps), f'{path}:{n}',
                                  str(rec.get('spec', '')), str(rec.get('formula', ''))))
    return out


def _bag(path: Path, seed: str, atoms: list[str], rate_hz: float, staleness_s: float,
         warnings: list[str]) -> list[Trajectory]:
    from ..audit.rollouts import read_bag
    out = []
    for r in read_bag(path, atoms, rate_hz, staleness_s):
        if r.unknown.any():
            bad = sorted({atoms[j] for j in range(len(atoms)) if r.unknown[:, j].any()})
            warnings.append(f'{path} ({r.name}): skipped: {", ".join(bad)} unknown on some frames')
            continue
        out.append(Trajectory(seed, tuple(frozenset(a for a, v in zip(atoms, row) if v) for row in r.values.tolist()),
                              f'{path}#{r.name}'))
    return out


def _files(path: Path) -> Iterable[Path]:
    if path.is_file() or (path / 'metadata.yaml').exists():
        yield path
    elif path.is_dir():
        for child in sorted(path.iterdir()):
            if child.is_dir() or child.suffix == '.jsonl':
                yield from _files(child)
    else:
        raise SafemanipError(f'{path}: no such file or folder')


def load(paths: list[str | Path], atoms: list[str], rate_hz: float = 20.0, staleness_s: float = 0.5,
         warnings: list[str] | None = None, absent_false: bool = False) -> list[Trajectory]:
    """Every trajectory under ``paths`` (``atoms``: the propositions the
    specifications read; a bag is read for those).  A file or bag reached
    twice (``s1 ./s1/``, a link to it) is read once, and each repeat said in
    ``warnings``.  A trace whose steps are objects of booleans names every
    proposition it gives: an atom it never names is an error (a typo would
    read as false) unless ``absent_false``, as for ``safemanip check``."""
    warnings = warnings if warnings is not None else []
    out: list[Trajectory] = []
    read: dict[Path, str] = {}
    reads = () if absent_false else atoms
    for given in paths:
        root = Path(given)
        seed = root.stem if root.is_file() else root.resolve().name
        found = False
        for path in _files(root):
            found = True
            key = path.resolve()
            if key in read:
                warnings.append(f'{path}: again (as {read[key]}): read once')
                continue
            read[key] = str(path)
            if path.is_dir():
                out += _bag(path, seed, atoms, rate_hz, staleness_s, warnings)
            elif (first := _first_object(path)) is not None and ROLLOUT_LOG_KEY in first:
                out += _rollout_log(path, seed)
            else:
                out += [Trajectory(seed, tuple(steps), f'{path}#{k}') for k, steps in
                        enumerate(read_step_traces(path, reads))]
        if not found:
            raise SafemanipError(f'{root}: no trace (.jsonl), rollout log or bag in it')
    return out


__all__ = ['Trajectory', 'load']
