"""Helpers: build a suite from YAML text and run it over traces written as
strings of 0/1/? per predicate (? = unknown)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from safemanip_ros.monitor.core import Monitor, RolloutResult
from safemanip_ros.spec.suite import instantiate, load_suite


def suite_from_text(tmp_path: Path, text: str, name: str = 'suite.yaml'):
    path = tmp_path / name
    path.write_text(text)
    return load_suite(path)


def frames_from_strings(predicates: list[str], signals: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    length = len(next(iter(signals.values())))
    values = np.zeros((length, len(predicates)), bool)
    unknown = np.zeros((length, len(predicates)), bool)
    for j, p in enumerate(predicates):
        s = signals.get(p, '0' * length)
        assert len(s) == length, p
        for t, ch in enumerate(s):
            values[t, j] = ch == '1'
            unknown[t, j] = ch == '?'
    return values, unknown


def run_signals(iset, signals: dict[str, str]) -> RolloutResult:
    monitor = Monitor(iset)
    values, unknown = frames_from_strings(monitor.predicates, signals)
    return monitor.run(values[None], unknown[None])[0]


def run_live(iset, signals: dict[str, str]) -> RolloutResult:
    """The same trace, one frame at a time as the live node does."""
    monitor = Monitor(iset)
    values, unknown = frames_from_strings(monitor.predicates, signals)
    for t in range(values.shape[0]):
        monitor.step(values[t], unknown[t])
    return monitor.finish()[0]


def simple_suite(tmp_path: Path, properties: str, predicates=('a', 'b', 'c'), derived: str = '',
                 unknown_true: tuple[str, ...] = ()):
    preds = '\n'.join(f'  {p}: {{description: test predicate {p}'
                      f'{", unknown_as: true" if p in unknown_true else ""}}}' for p in predicates)
    text = f'suite: test\nrate_hz: 20\npredicates:\n{preds}\n'
    if derived:
        text += f'derived:\n{derived}\n'
    text += f'properties:\n{properties}\n'
    return instantiate(suite_from_text(tmp_path, text))


def prop(name='p', formula='G(a -> b)', trigger='a', recovery='F b', end_policy='weak', extra=''):
    return (f'  - name: {name}\n    category: test\n    formula: "{formula}"\n    trigger: "{trigger}"\n'
            f'    recovery: "{recovery}"\n    end_policy: {end_policy}\n    description: test property\n{extra}')
