"""Batch (many rollouts at once) and frame-by-frame live runs agree exactly
on random traces, for every property of the SafeManip suite, and both agree
with a literal scalar transcription of SEMANTICS.md §4 (including step 3's
restart of the main DFA on the closing frame)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from monitor_helpers import reference_run

from safemanip_ros.errors import MonitorInputError
from safemanip_ros.monitor import core, machine
from safemanip_ros.monitor.core import Monitor
from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate, load_suite

ONTO = load_ontology([REPO / 'config' / 'ontology' / 'kitchen.yaml'])
ISET = instantiate(load_suite(REPO / 'config' / 'properties' / 'safemanip.yaml'), ONTO,
                   scene_from_mapping({'mug': 'mug', 'chicken': 'raw_chicken', 'microwave': 'microwave'}, ONTO, 't'))
LIVE = Monitor(ISET, batch=1)
P = len(LIVE.predicates)


def _signals(seed: int, B: int, T: int):
    rng = np.random.default_rng(seed)
    # Held values (runs of 1-30 frames) so devices and timeouts actually fire.
    values = np.zeros((B, T, P), bool)
    for b in range(B):
        for p in range(P):
            t = 0
            v = rng.random() < 0.3
            while t < T:
                run = int(rng.integers(1, 30))
                values[b, t:t + run, p] = v
                v = rng.random() < 0.35
                t += run
    unknown = rng.random((B, T, P)) < 0.02
    lengths = rng.integers(0, T + 1, size=B)
    return values, unknown, lengths


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_batch_equals_frame_by_frame(seed):
    B, T = 5, 160
    values, unknown, lengths = _signals(seed, B, T)
    batch = Monitor(ISET, batch=B).run(values, unknown, lengths)
    for b in range(B):
        LIVE.reset()
        for t in range(int(lengths[b])):
            LIVE.step(values[b, t], unknown[b, t])
        live = LIVE.finish()[0]
        assert live.to_dict() == batch[b].to_dict()


def test_random_traces_exercise_the_machine():
    values, unknown, lengths = _signals(7, 4, 300)
    results = Monitor(ISET, batch=4).run(values, unknown, np.full(4, 300))
    total_v = sum(r.violations for res in results for r in res.instances)
    recovered = sum(e.recovered for res in results for r in res.instances for e in r.episodes)
    assert total_v > 10 and recovered > 5


def _summary(result):
    return [{'triggers': r.triggers, 'violations': r.violations, 'pending': r.pending,
             'episodes': [(e.start, e.end, e.recovered) for e in r.episodes]} for r in result.instances]


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_batch_equals_scalar_reference_of_section_4(seed):
    B, T = 3, 160
    values, unknown, lengths = _signals(seed, B, T)
    batch = Monitor(ISET, batch=B).run(values, unknown, lengths)
    for b in range(B):
        n = int(lengths[b])
        assert _summary(batch[b]) == reference_run(LIVE, values[b, :n], unknown[b, :n])
        # The other fields of each result, from their definitions (SEMANTICS.md §5).
        reads = unknown[b, :n]
        for inst, r in zip(LIVE.instances, batch[b].instances):
            assert (r.name, r.instance, r.category, r.severity) == (inst.property, inst.instance, inst.category,
                                                                       inst.severity)
            assert r.frames == batch[b].frames == n
            assert r.unsafe_frames == sum(e.frames for e in r.episodes)
            cols = [LIVE.predicates.index(p) for p in sorted(inst.needs)]
            assert r.unknown_frames == {p: int(reads[:, c].sum()) for p, c in zip(sorted(inst.needs), cols)}
            assert r.unknown_any_frames == int(reads[:, cols].any(axis=1).sum())


def test_random_traces_exercise_the_closing_frame_restart():
    """The random traces reach step 3's interesting branches: back-to-back
    episodes (the restarted M failed on the closing frame, so the next
    episode opens on the following frame)."""
    values, unknown, lengths = _signals(7, 4, 300)
    results = Monitor(ISET, batch=4).run(values, unknown, np.full(4, 300))
    back_to_back = sum(1 for res in results for r in res.instances
                       for e1, e2 in zip(r.episodes, r.episodes[1:]) if e1.recovered and e2.start == e1.end + 1)
    assert back_to_back >= 1
    for b, res in enumerate(results):
        assert _summary(res) == reference_run(LIVE, values[b], unknown[b])


SMALL = None


def _small_suite(tmp_path_factory):
    from monitor_helpers import prop, simple_suite
    global SMALL
    if SMALL is None:
        props = ''.join([
            prop('resp', 'G(a -> b)', 'a', 'F(c)'),
            prop('until', 'G(a -> (b U c))', 'a', 'F(c | !a)'),
            prop('next', 'G(a -> X b)', 'a', 'true'),
            prop('eventually', 'G(a -> F b)', 'a', 'F(b)', end_policy='strong'),
            prop('never', 'G(!(a & c))', 'a & c', 'F(!c)'),
        ])
        SMALL = Monitor(simple_suite(tmp_path_factory.mktemp('small'), props), batch=4)
    return SMALL


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_small_suite_equals_scalar_reference(tmp_path_factory, seed):
    """Independent, short-run traces over three atoms hit every branch of §4
    step 3 (a trigger on the closing frame, a restarted M that is already
    false, an episode opened and closed on the last frame)."""
    mon = _small_suite(tmp_path_factory)
    rng = np.random.default_rng(seed)
    T = 40
    values = rng.random((4, T, len(mon.predicates))) < 0.45
    lengths = rng.integers(1, T + 1, size=4)
    results = mon.run(values, None, lengths)
    for b in range(4):
        n = int(lengths[b])
        assert _summary(results[b]) == reference_run(mon, values[b, :n])


def _live_results(mon: Monitor, values, unknown, lengths):
    """Frame-by-frame results of each rollout on a batch-1 twin of ``mon``."""
    live = Monitor(mon.instance_set, batch=1)
    out = []
    for b in range(values.shape[0]):
        live.reset()
        for t in range(int(lengths[b])):
            live.step(values[b, t], None if unknown is None else unknown[b, t])
        out.append(live.finish()[0].to_dict())
    return out


@pytest.mark.slow
def test_wide_episode_machines_equal_dense_ones(monkeypatch):
    """Instances whose tables are made on demand (wide: too many states ×
    letters for a full table) give the same results as full tables, on the
    whole suite, over whole episodes and live."""
    values, unknown, lengths = _signals(11, 4, 200)
    dense = Monitor(ISET, batch=4)
    assert dense.machines.all_dense
    expected = [r.to_dict() for r in dense.run(values, unknown, lengths, keep_verdicts=True)]
    monkeypatch.setattr(machine, 'DENSE_MAX_RECORDS', 0)
    wide = Monitor(ISET, batch=4)
    assert wide.machines.wide.size == len(wide.instances)
    results = wide.run(values, unknown, lengths, keep_verdicts=True)
    assert [r.to_dict() for r in results] == expected
    assert _live_results(wide, values, unknown, lengths) == expected


@pytest.mark.parametrize('frames', [200, 203])   # letters packed as 64-bit words / as bytes (3 x 203 is no multiple of 8)
def test_stepping_by_outcome_code_equals_stepping_by_base(monkeypatch, frames):
    """Dense machines step whole episodes through ``by_code`` (an add and a
    gather a frame); without it (a table too large to copy four times) they
    step by base, with the shift.  Both give the live results."""
    values, unknown, lengths = _signals(17, 3, frames)
    coded = Monitor(ISET, batch=3)
    assert coded.machines.by_code is not None
    expected = [r.to_dict() for r in coded.run(values, unknown, lengths, keep_verdicts=True)]
    assert sum(p['violations'] for r in expected for p in r['properties']) >= 10
    assert expected == _live_results(coded, values, unknown, lengths)
    monkeypatch.setattr(machine, 'CODED_MAX_RECORDS', 0)
    by_base = Monitor(ISET, batch=3)
    assert by_base.machines.by_code is None and by_base.machines.all_dense
    assert [r.to_dict() for r in by_base.run(values, unknown, lengths, keep_verdicts=True)] == expected


def test_letters_packed_as_words_equal_letters_packed_as_bytes():
    rng = np.random.default_rng(3)
    frames = rng.random((40, 6, 16)) < 0.4
    cols = rng.integers(0, 40, size=(9, 5)).astype(np.intp)
    for shift in (0, 2, 3):
        words = machine._pack(frames, cols, np.uint8, shift)
        by_bytes = machine._pack(frames[:, :, :15], cols, np.uint8, shift)      # rows of 90 bytes: not words
        expected = sum(frames[cols[:, j]].astype(np.int64) << (j + shift) for j in range(5))
        assert words.dtype == np.uint8 and (words == expected).all()
        assert (by_bytes == expected[..., :15]).all()


def test_a_formula_over_many_atoms_is_wide_and_exact(tmp_path):
    """A property reading 16 atoms (2**16 letters) runs on a wide machine, and
    agrees with frame by frame and with the scalar transcription of §4."""
    from monitor_helpers import prop, simple_suite
    atoms = [f'x{j:02d}' for j in range(16)]
    conj = ' & '.join(atoms[:14])
    iset = simple_suite(tmp_path, prop('many', f'G(({conj}) -> X(x14 | x15))', 'x00', 'F(x15)'),
                        predicates=tuple(atoms))
    mon = Monitor(iset, batch=3)
    assert mon.machines.wide.tolist() == [0]
    rng = np.random.default_rng(5)
    values = rng.random((3, 300, 16)) < 0.93          # the 14-atom conjunction holds now and then
    values[..., 14:] = rng.random((3, 300, 2)) < 0.5
    lengths = np.array([300, 170, 1])
    results = mon.run(values, None, lengths)
    assert sum(r.instances[0].violations for r in results) >= 10
    assert [r.to_dict() for r in results] == _live_results(mon, values, None, lengths)
    for b in range(3):
        n = int(lengths[b])
        assert _summary(results[b]) == reference_run(mon, values[b, :n])


def test_columns_in_windows_of_frames_equal_whole_episodes(monkeypatch):
    """Rollouts too long for one block's memory have their program columns
    stepped in windows of frames; the results are the same."""
    values, unknown, lengths = _signals(13, 3, 250)
    expected = [r.to_dict() for r in Monitor(ISET, batch=3).run(values, unknown, lengths, keep_verdicts=True)]
    mon = Monitor(ISET, batch=3)
    monkeypatch.setattr(core, 'RUN_BLOCK_BYTES', mon.program.num_columns * 40)   # 1 rollout a block, 40 frames a window
    seen = []
    windows = mon._column_windows

    def spy(*args):
        for t0, V in windows(*args):
            seen.append((t0, V.shape[-1]))
            yield t0, V
    monkeypatch.setattr(mon, '_column_windows', spy)
    assert [r.to_dict() for r in mon.run(values, unknown, lengths, keep_verdicts=True)] == expected
    assert seen[:7] == [(0, 40), (40, 40), (80, 40), (120, 40), (160, 40), (200, 40), (240, 10)]
    # The monitor is usable live afterwards (its program is back at batch 3).
    mon.reset()
    mon.step(values[:, 0], unknown[:, 0])


def test_run_rejects_inconsistent_shapes():
    mon = Monitor(ISET, batch=2)
    values = np.zeros((2, 10, P), bool)
    with pytest.raises(MonitorInputError, match='lengths'):
        mon.run(values, None, [3, 11])
    with pytest.raises(MonitorInputError, match='expected'):
        mon.run(values[:, :, :-1])
    with pytest.raises(MonitorInputError, match='unknown'):
        mon.run(values, np.zeros((2, 9, P), bool))


def test_stepping_a_batch_with_active_masks_equals_run():
    """``step`` over a batch whose rollouts end at different frames, the
    ended ones passed as inactive until all are finished together, gives
    what ``run`` gives: an inactive rollout's episode state and counters are
    left as they were."""
    B, T = 6, 180
    values, unknown, lengths = _signals(17, B, T)
    lengths[0], lengths[1] = T, 0
    expected = [r.to_dict() for r in Monitor(ISET, batch=B).run(values, unknown, lengths)]
    mon = Monitor(ISET, batch=B)
    for t in range(T):
        active = lengths > t
        res = mon.step(values[:, t], unknown[:, t], active)
        assert (res.frame[active] == t).all()
    got = [r.to_dict() for r in mon.finish()]
    assert got == expected
    assert sum(p['violations'] for r in got for p in r['properties']) > 5


def test_resized_monitor_equals_a_new_one():
    """resize() keeps the compiled program and machines and starts over: a
    monitor resized between runs (and then stepped live) gives what a new
    monitor of that batch gives."""
    mon = Monitor(ISET, batch=2)
    for seed, B in ((1, 5), (2, 1), (3, 3)):
        values, unknown, lengths = _signals(seed, B, 120)
        with pytest.raises(MonitorInputError):      # a run does not change the batch by itself
            mon.run(values, unknown, lengths)
        mon.resize(B)
        got = [r.to_dict() for r in mon.run(values, unknown, lengths)]
        assert got == [r.to_dict() for r in Monitor(ISET, batch=B).run(values, unknown, lengths)]
    mon.resize(4)           # not the batch it was built for: the program's device states follow
    values, unknown, _ = _signals(4, 4, 80)
    fresh = Monitor(ISET, batch=4)
    for t in range(80):
        a, b = mon.step(values[:, t], unknown[:, t]), fresh.step(values[:, t], unknown[:, t])
        assert np.array_equal(a.violated, b.violated)
        assert np.array_equal(a.verdicts, b.verdicts)
    assert [r.to_dict() for r in mon.finish()] == [r.to_dict() for r in fresh.finish()]
    with pytest.raises(MonitorInputError):
        mon.resize(0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.dictionaries(st.sampled_from('abcdez'), st.sampled_from([True, False, None]),
                                                         max_size=5)), min_size=1, max_size=6),
       st.lists(st.sampled_from('abcdx'), max_size=7))
@pytest.mark.slow
def test_trace_matrix_is_every_frame_asked_for_every_predicate(frames, predicates):
    """The matrices a trace file becomes: per frame and predicate, the frame's
    value — null, and a name a frame object does not mention, unknown; a name
    a step list does not list, false; a predicate listed twice, its column
    twice; names outside the predicates ignored."""
    from safemanip_ros.ltlf.trace import Frame, Trace
    from safemanip_ros.monitor.frames import trace_matrix

    trace = Trace('t', 1, [Frame({n: True for n in vals} if closed else dict(vals), closed)
                           for closed, vals in frames])
    values, unknown = trace_matrix(trace, predicates)
    assert values.shape == unknown.shape == (len(frames), len(predicates))
    for t, frame in enumerate(trace.frames):
        for j, name in enumerate(predicates):
            v = frame.value(name)
            assert (bool(values[t, j]), bool(unknown[t, j])) == (bool(v), v is None)
