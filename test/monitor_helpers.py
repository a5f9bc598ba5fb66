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


def span_signal(length: int, *spans: tuple[int, int]) -> str:
    """A 0/1 signal of ``length`` frames, true on the inclusive ``spans`` (clipped to the trace)."""
    sig = ['0'] * length
    for a, b in spans:
        for t in range(a, min(b, length - 1) + 1):
            sig[t] = '1'
    return ''.join(sig)


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


def reference_run(monitor: Monitor, values: np.ndarray, unknown: np.ndarray | None = None) -> list[dict]:
    """SEMANTICS.md §4 transcribed literally, one instance at a time, on the
    compiled DFA objects (scalar ``DFA.step``): the oracle for the vectorised
    :class:`Monitor`.  Derived predicates come from the monitor's own program
    (the devices have their own tests).  Returns, per instance, triggers,
    violations, pending and episodes ``(start, end, recovered)``."""
    from safemanip_ros.ltlf.cache import compile_cached
    from safemanip_ros.ltlf.verdict import Verdict

    prog = monitor.program
    prog.reset()
    frame = prog.new_frame_matrix()
    T = values.shape[0]
    columns = []
    for t in range(T):
        row = np.where(unknown[t], monitor.unknown_as, values[t]) if unknown is not None else values[t]
        frame[monitor._pred_col, 0] = row
        prog.evaluate(frame)
        columns.append(frame[:, 0].copy())
    prog.reset()
    monitor.reset()

    def letter(dfa, col):
        return dfa.letter({a: bool(col[prog.index[a]]) for a in dfa.atoms})

    out = []
    for d, inst in enumerate(monitor.instances):
        M, R = compile_cached(inst.formula), compile_cached(inst.recovery)
        m, r, mode, start, fresh = M.initial, R.initial, 'watching', -1, True
        triggers, episodes = 0, []
        for t, col in enumerate(columns):
            triggers += bool(col[monitor.trigger_cols[d]])
            opened_now = False
            if mode == 'watching':                                    # step 1
                m, fresh = M.step(m, letter(M, col)), False
                if M.labels[m] is Verdict.FALSE:
                    mode, start, opened_now = 'violated', t, True
                    r = R.step(R.initial, letter(R, col))
            elif mode == 'violated':                                  # step 2
                r = R.step(r, letter(R, col))
            if mode == 'violated' and R.labels[r] in (Verdict.TRUE, Verdict.PRESUMABLY_TRUE):   # step 3
                episodes.append((start, t, True))
                mode = 'watching'
                if opened_now:
                    m, fresh = M.initial, True
                else:
                    m, fresh = M.step(M.initial, letter(M, col)), False
        pending = False
        if T:
            if mode == 'violated':
                episodes.append((start, T - 1, False))
            elif M.labels[m] is Verdict.FALSE:
                episodes.append((T - 1, T - 1, False))
            elif M.labels[m] is Verdict.PRESUMABLY_FALSE and not fresh:
                if inst.end_policy == 'strong':
                    episodes.append((T - 1, T - 1, False))
                else:
                    pending = True
        out.append({'triggers': triggers, 'violations': len(episodes), 'pending': pending,
                    'episodes': sorted(episodes)})
    return out
