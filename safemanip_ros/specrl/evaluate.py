"""SpecRLBench's evaluation of proposition trajectories (``safemanip specrl
evaluate`` and :func:`evaluate`): per specification and seed, ηs, ηv, ηo and
µ (finite-horizon), ηv and µacc (infinite-horizon), from the compiled DFA of
each specification (:mod:`.metrics`)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import SafemanipError
from ..ltlf.runtime import StepTable
from .families import Spec
from .metrics import SeedRow, SpecRow, SpecTables
from .traces import Trajectory


class _Vocabulary:
    """Trajectories as one padded boolean array ``[n, T, V]`` over every
    proposition they hold, so a specification's letters are one product."""

    def __init__(self, trajectories: Sequence[Trajectory]) -> None:
        names = sorted({a for t in trajectories for s in t.steps for a in s})
        self.index = {a: j for j, a in enumerate(names)}
        self.lengths = np.array([len(t.steps) for t in trajectories], np.int64)
        T = int(self.lengths.max()) if len(trajectories) else 0
        self.values = np.zeros((len(trajectories), T, len(names)), bool)
        for k, t in enumerate(trajectories):
            for i, step in enumerate(t.steps):
                for a in step:
                    self.values[k, i, self.index[a]] = True

    def letters(self, table: StepTable, rows: np.ndarray) -> list[np.ndarray]:
        """Each trajectory of ``rows``'s bit-packed letters for ``table``'s DFA."""
        cols = [self.index.get(a, -1) for a in table.dfa.atoms]
        packed = np.zeros((len(rows), self.values.shape[1]), np.int64)
        for bit, col in enumerate(cols):
            if col >= 0:
                packed |= self.values[rows, :, col].astype(np.int64) << bit
        return [packed[k, :self.lengths[r]] for k, r in enumerate(rows)]


def evaluate_specs(specs: Sequence[Spec], trajectories: Sequence[Trajectory]) -> list[SpecRow]:
    """One :class:`SpecRow` per specification: every trajectory rolled out
    for it (its ``spec`` name, or its formula where the trajectory names one)
    or for any (no ``spec``), grouped by seed."""
    vocab = _Vocabulary(trajectories)
    by_spec: dict[str, list[int]] = defaultdict(list)
    by_formula: dict[str, list[int]] = defaultdict(list)
    anyone: list[int] = []
    for k, t in enumerate(trajectories):
        if t.formula:
            by_formula[_canonical(t.formula)].append(k)
        elif t.spec:
            by_spec[t.spec].append(k)
        else:
            anyone.append(k)
    rows = []
    for spec in specs:
        tables = SpecTables.of(spec.formula, spec.finite)
        mine = sorted(set(by_spec.get(spec.name, [])) | set(by_formula.get(_canonical(spec.formula), [])) |
                      set(anyone))
        row = SpecRow(spec.name, spec.formula, spec.finite)
        ks = np.array(mine, np.int64)
        # Every seed's trajectories stepped together, then grouped.
        results = tables.score(lambda table: vocab.letters(table, ks))
        seeds: dict[str, list[int]] = defaultdict(list)
        for pos, k in enumerate(mine):
            seeds[trajectories[k].seed].append(pos)
        for seed in sorted(seeds, key=_seed_order):
            row.seeds.append(SeedRow.of(spec.name, seed, spec.finite, [results[pos] for pos in seeds[seed]]))
        rows.append(row)
    return rows


@functools.lru_cache(maxsize=4096)
def _canonical(formula: str) -> str:
    """The formula's canonical text (trajectories repeat a few formulas many times)."""
    from ..ltlf import parse
    return str(parse(formula))


def _seed_order(seed: str) -> tuple[int, str]:
    digits = ''.join(c for c in seed if c.isdigit())
    return (int(digits) if digits else -1, seed)


def evaluate(specs: Sequence[Spec], trajectories: Sequence[Trajectory], engine: str = 'local', workers: int = 1,
             ray_address: str | None = None) -> list[SpecRow]:
    """:func:`evaluate_specs`, here (``local``) or spread over Ray tasks
    (``ray``: a chunk of specifications per task, the trajectories shared
    once through the object store)."""
    names, formulas = {s.name for s in specs}, {_canonical(s.formula) for s in specs}
    unknown = [t.formula or t.spec for t in trajectories
               if (t.formula and _canonical(t.formula) not in formulas) or (not t.formula and t.spec and
                                                                           t.spec not in names)]
    if unknown and len(unknown) == len(trajectories):
        raise SafemanipError(f'every trajectory was rolled out for a specification not asked for (e.g. '
                             f'{unknown[0]!r}); give its family or formula')
    if engine == 'local':
        return evaluate_specs(specs, trajectories)
    if engine != 'ray':
        raise SafemanipError(f'unknown engine {engine!r}; choose local or ray')
    try:
        import ray
    except ImportError as err:
        raise SafemanipError('the Ray engine needs ray: pip install "safemanip_ros[ray]"') from err
    if not ray.is_initialized():
        if ray_address:
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False, num_cpus=max(1, workers))
    shared: Any = ray.put(list(trajectories))
    remote = ray.remote(evaluate_specs)
    n = max(1, workers) * 4
    chunks = [list(specs[i::n]) for i in range(n) if specs[i::n]]
    done = ray.get([remote.remote(chunk, shared) for chunk in chunks])
    by_name = {r.spec: r for rows in done for r in rows}
    return [by_name[s.name] for s in specs]


__all__ = ['evaluate', 'evaluate_specs']
