"""Smoothing devices (SEMANTICS.md §3) on hand-computed traces, including the
noisy cases they exist for (1-2 frame flickers)."""

from __future__ import annotations

import numpy as np
import pytest

from safemanip_ros.monitor.program import Program
from safemanip_ros.spec.expressions import parse_derived


def run_device(definition: str, **inputs: str) -> str:
    """Run one derived predicate over input strings like '0110' → output string."""
    names = sorted(inputs)
    prog = Program(names, {'out': parse_derived(definition, 'test')})
    prog.finalize(batch=1)
    col = prog.index['out']
    length = len(next(iter(inputs.values())))
    v = prog.new_frame_matrix()
    out = []
    for t in range(length):
        for n in names:
            v[prog.index[n], 0] = inputs[n][t] == "1"
        prog.evaluate(v)
        out.append("1" if v[col, 0] else "0")
    return ''.join(out)


@pytest.mark.parametrize('definition, inputs, expected', [
    ('rose(p)',        {'p': '1100110'}, '1000100'),      # p(-1) = false, so frame 0 can rise
    ('fell(p)',        {'p': '1100110'}, '0010001'),
    ('held(p, 3)',     {'p': '1110111101'}, '0010001100'),  # rises after k frames, falls at once
    ('held(p, 1)',     {'p': '0110'}, '0110'),
    ('sticky(p, 3)',   {'p': '0100000100'}, '0111000111'),  # rises at once, falls after k false frames
    ('sticky(p, 1)',   {'p': '0110'}, '0110'),
    # debounce: takes p only after p differed from the output on each of the last k frames
    ('debounce(p, 3)', {'p': '0110111100010001111'}, '0000001111000000011'),
    ('debounce(p, 1)', {'p': '0110'}, '0110'),
    ('latch(s, r)',    {'s': '0100010000', 'r': '0001000011'}, '0110011100'),
    ('latch(s, r)',    {'s': '11', 'r': '11'}, '00'),      # reset wins
    # timeout(start, stop, 3): armed by start, true from the 3rd frame after, until stop
    ('timeout(s, x, 3)', {'s': '0100000000', 'x': '0000000100'}, '0000111000'),
    ('timeout(s, x, 2)', {'s': '0100100000', 'x': '0001000000'}, '0000001111'),
    ('timeout(s, x, 0)', {'s': '0110', 'x': '0001'}, '0110'),   # k = 0 fires at once
    ('timeout(s, x, 2)', {'s': '0110', 'x': '0110'}, '0000'),   # start with stop does not arm
    ('p & !q | false', {'p': '1100', 'q': '1010'}, '0100'),
    ('p <-> q',        {'p': '1100', 'q': '1010'}, '1001'),
    ('p -> q',         {'p': '1100', 'q': '1010'}, '1011'),
])
def test_device_semantics(definition, inputs, expected):
    assert run_device(definition, **inputs) == expected


def test_contact_tolerance_ignores_flickers_and_dropouts():
    # 20-frame tolerance = held(p, 21): a 20-frame contact, even with a 1-frame
    # dropout, never counts; 21 uninterrupted frames do.
    p = '1' * 20 + '0' + '1' * 10 + '0' + '1' * 21 + '0'
    out = run_device('held(p, 21)', p=p)
    assert out.index('1') == 20 + 1 + 10 + 1 + 20
    assert out.count('1') == 1


def test_debounce_filters_short_grasp_flicker():
    # SafeManip's 5-frame symmetric debounce of the raw grasp signal.
    raw = '0011111' + '1' * 10 + '00' + '1' * 10 + '00000' + '0' * 5
    out = run_device('debounce(p, 5)', p=raw)
    assert out[:6] == '000000' and out[6] == '1'         # needs 5 frames of 1
    assert '0' not in out[6:29]                          # a 2-frame dropout is ignored
    assert out.rindex('1') == 32 and out[33:] == '0' * 6  # falls on the 5th frame of 0 (frame 33)


def test_devices_are_independent_per_rollout():
    prog = Program(['p'], {'out': parse_derived('held(p, 2)', 'test')})
    prog.finalize(batch=2)
    v = prog.new_frame_matrix()
    seen = []
    for a, b in [(1, 0), (1, 1), (0, 1)]:
        v[prog.index["p"]] = [a, b]
        prog.evaluate(v)
        seen.append(v[prog.index["out"]].tolist())
    assert seen == [[False, False], [True, False], [False, True]]
    prog.reset(np.array([False, True]))        # rollout 1 starts over: its count of true frames is gone
    v[prog.index["p"]] = [1, 1]
    prog.evaluate(v)
    assert v[prog.index["out"]].tolist() == [False, False]


# Frame indices as int16; as int32 for windows longer than int16 reaches; as int32 for a long episode.
@pytest.mark.slow
@pytest.mark.parametrize('T, long_windows', [(400, False), (400, True), (2 ** 14 + 60, False)])
def test_whole_episode_evaluation_equals_frame_by_frame(T, long_windows):
    """``evaluate_over_time`` (the offline path: every device in closed form
    over time) gives exactly what stepping ``evaluate`` frame by frame gives,
    for every device kind, windows 1-5 (timeout 0-4), nested devices and expressions, on
    random inputs with flickers and long runs, in a batch, short and long, and
    with windows far longer than the episode."""
    defs = {f'{kind}_{w}': f'{kind}(p, {w})' for kind in ('held', 'sticky', 'debounce') for w in range(1, 6)}
    defs |= {f'timeout_{w}': f'timeout(p, q, {w})' for w in range(5)}
    defs |= {f'{kind}_{w}': f'{kind}(p, q, {w})' for kind in ('restarting_timeout', 'restarting_pulse')
             for w in range(5)}
    defs |= {'rose': 'rose(p)', 'fell': 'fell(q)', 'latch': 'latch(p, q)', 'latch_same': 'latch(p, p)',
             'db': 'debounce(p | q, 2)', 'nested': 'held(db, 3)', 'latch_rose': 'latch(q, rose)',
             'expr': 'sticky_2 & !latch_rose', 'timeout_nested': 'timeout(rose, fell | held_2, 3)'}
    if long_windows:
        defs |= {f'{kind}_long': f'{kind}(p, 40000)' for kind in ('held', 'sticky', 'debounce')}
        defs['timeout_long'] = 'timeout(p, q, 40000)'
        defs['restarting_long'] = 'restarting_timeout(p, q, 40000)'
        defs['pulse_long'] = 'restarting_pulse(q, p, 40000)'
    _assert_over_time_equals_stepping(defs, T)


@pytest.mark.parametrize('T, window', [(300, 1), (300, 7), (30, 30), (30, 31), (30, 200)])
def test_whole_episode_evaluation_with_one_window_per_kind(T, window):
    """The same when every device of a kind shares its window (the closed
    forms then work on all of a kind's devices at once), with windows up
    to, at and beyond the episode's length."""
    defs = {f'{kind}_{x}': f'{kind}({x}, {window})' for kind in ('held', 'sticky', 'debounce') for x in 'pq'}
    defs |= {'timeout_p': f'timeout(p, q, {window})', 'timeout_q': f'timeout(q, p, {window})'}
    defs |= {'restart_p': f'restarting_timeout(p, q, {window})', 'pulse_q': f'restarting_pulse(q, p, {window})'}
    _assert_over_time_equals_stepping(defs, T)


def _stepped(definition: str, p: str, q: str) -> str:
    """The device's output, stepped frame by frame, on 0/1 strings p and q."""
    prog = Program(['p', 'q'], {'out': parse_derived(definition, 'test')})
    prog.finalize(batch=1)
    out = []
    for a, b in zip(p, q):
        v = prog.new_frame_matrix()
        v[prog.index['p'], 0], v[prog.index['q'], 0] = a == '1', b == '1'
        prog.evaluate(v)
        out.append('1' if v[prog.index['out'], 0] else '0')
    return ''.join(out)


def test_restarting_timers_restart_at_every_start_and_end_on_stop():
    # start at 0, again at 2: the count restarts, so a 3-frame watch fires at 5, not 3.
    p, q = '1010000000', '0000000000'
    assert _stepped('restarting_timeout(p, q, 3)', p, q) == '0000011111'
    assert _stepped('restarting_pulse(p, q, 3)', p, q) == '0000010000'      # one frame, then the watch is over
    # a stop ends the watch (its own frame included); only a new start opens it again.
    p, q = '1000001000', '0010000000'
    assert _stepped('restarting_timeout(p, q, 2)', p, q) == '0000000011'
    # a start and a stop on the same frame: no watch; window 0 fires on the start frame.
    assert _stepped('restarting_timeout(p, q, 0)', '1100', '1000') == '0111'
    assert _stepped('restarting_pulse(p, q, 0)', '1100', '0000') == '1100'
    # timeout() by contrast keeps the first start and is stopped the same way.
    assert _stepped('timeout(p, q, 3)', '1010000000', '0000000000') == '0001111111'


def _assert_over_time_equals_stepping(defs: dict[str, str], T: int) -> None:
    prog = Program(['p', 'q'], {k: parse_derived(v, 'test') for k, v in defs.items()})
    B = 6
    prog.finalize(batch=B)
    rng = np.random.default_rng(7)
    V = np.zeros((T, prog.num_columns, B), bool)
    V[:, 1] = True                                   # the constant-true column, as new_frame_matrix sets it
    for k, name in enumerate(('p', 'q')):
        flip = rng.random((T, B)) < rng.choice([0.05, 0.3, 0.7], size=B)   # long runs to flickers, per rollout
        V[:, prog.index[name]] = np.logical_xor.accumulate(flip, axis=0) ^ (k == 1)
    expected = V.copy()
    prog.reset()
    for t in range(T):
        prog.evaluate(expected[t])
    got = prog.evaluate_over_time(np.ascontiguousarray(V.transpose(1, 2, 0))).transpose(2, 0, 1)   # time last
    for name in defs:
        col = prog.index[name]
        assert np.array_equal(got[:, col], expected[:, col]), name
    assert np.array_equal(got, expected)
