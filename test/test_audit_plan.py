"""How an audit finds its sources and splits them into tasks for its workers
(pure functions: no bags are read)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from safemanip_ros.audit import engine
from safemanip_ros.audit.engine import CHUNK, _source_bytes, plan_tasks
from safemanip_ros.audit.rollouts import discover
from safemanip_ros.bag import is_bag


def _makespan(costs: list[int], workers: int) -> int:
    """Greedy list scheduling, as the engines hand tasks out: each task in
    order to the worker that is free first."""
    free = [0] * workers
    for c in costs:
        free[free.index(min(free))] += c
    return max(free)


@pytest.mark.parametrize('seed', range(40))
def test_plan_covers_every_source_once_largest_first(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    sizes = [int(s) for s in rng.integers(1, 10_000, n)] if seed % 3 else [500] * n     # also all equal
    workers = int(rng.integers(1, 9))
    tasks = plan_tasks(sizes, workers)
    flat = [i for t in tasks for i in t]
    assert sorted(flat) == list(range(n))
    assert flat == sorted(range(n), key=lambda i: -sizes[i])        # largest first, ties in input order
    assert all(1 <= len(t) <= CHUNK for t in tasks)
    if workers == 1:
        assert len(tasks) == -(-n // CHUNK)
        assert max(map(len, tasks), default=0) - min(map(len, tasks), default=0) <= 1
        return
    left = sum(sizes)
    for t in tasks:     # a task of several sources takes at most its share of what is left
        taken = sum(sizes[i] for i in t)
        assert len(t) == 1 or taken <= left / (engine.TASKS_PER_WORKER * workers)
        left -= taken


def test_plan_keeps_workers_busy_to_the_end():
    """Where near-equal chunks leave a worker idle, the plan does not: 129
    equal sources were three chunks for two workers (two chunks' time,
    1.5x); 40 sources of mixed sizes were two chunks of 20, whatever their
    sizes."""
    equal = [100] * 129
    assert _makespan([sum(equal[i] for i in t) for t in plan_tasks(equal, 2)], 2) <= 0.51 * sum(equal)
    rng = np.random.default_rng(7)
    mixed = [int(s) for s in rng.choice([200, 400, 800, 1200, 1600, 2000], 40)]
    for workers in (2, 3, 4):
        costs = [sum(mixed[i] for i in t) for t in plan_tasks(mixed, workers)]
        assert _makespan(costs, workers) <= sum(mixed) / workers + max(mixed)


def test_source_bytes(tmp_path):
    bag = tmp_path / 'bag'
    (bag / 'sub').mkdir(parents=True)
    (bag / 'metadata.yaml').write_bytes(b'x' * 10)
    (bag / 'bag_0.mcap').write_bytes(b'x' * 1000)
    (bag / 'sub' / 'f').write_bytes(b'x' * 5)
    (tmp_path / 't.jsonl').write_bytes(b'x' * 7)
    os.symlink(bag, bag / 'sub' / 'loop')                      # not followed
    assert _source_bytes(str(bag)) == 1015
    assert _source_bytes(str(tmp_path / 't.jsonl')) == 7
    assert _source_bytes(str(tmp_path / 'missing')) == 0       # its worker says why it cannot be read


def _rglob_discover(paths: list[Path]) -> list[Path]:
    """The reference: every path under each folder, in path order, kept when
    it is a bag or a .jsonl file outside any bag."""
    out: list[Path] = []
    for p in paths:
        if is_bag(p) or (p.is_file() and p.suffix == '.jsonl'):
            out.append(p)
        elif p.is_dir():
            out += [c for c in sorted(p.rglob('*'))
                    if is_bag(c) or (c.is_file() and c.suffix == '.jsonl' and not any(is_bag(a) for a in c.parents))]
        else:
            out.append(p)
    return out


def test_discover_finds_bags_and_traces_in_path_order(tmp_path):
    def bag(path: Path) -> Path:
        (path / 'inner').mkdir(parents=True)
        (path / 'metadata.yaml').write_text('rosbag2_bagfile_information: {}\n')
        (path / 'bag_0.mcap').write_bytes(b'')
        (path / 'inner' / 'notes.jsonl').write_text('[]\n')       # inside a bag: not a source
        return path

    root = tmp_path / 'fleet'
    for name in ('policy_b/ep10', 'policy_b/ep2', 'policy_a/ep1', 'policy_a/deeper/ep0', 'z'):
        bag(root / name)
    (root / 'policy_a' / 'run.jsonl').write_text('[]\n')
    (root / 'policy_a' / 'run.json').write_text('[]\n')
    (root / 'empty').mkdir()
    os.symlink(root / 'policy_a' / 'ep1', root / 'linked_bag')
    os.symlink(root / 'policy_b', root / 'linked_folder')     # not descended into, as rglob
    found = discover([root, tmp_path / 'missing', root / 'z'])
    assert found == _rglob_discover([root, tmp_path / 'missing', root / 'z'])
    assert [str(p.relative_to(tmp_path)) for p in found] == [
        'fleet/linked_bag', 'fleet/policy_a/deeper/ep0', 'fleet/policy_a/ep1', 'fleet/policy_a/run.jsonl',
        'fleet/policy_b/ep10', 'fleet/policy_b/ep2', 'fleet/z', 'missing', 'fleet/z']
