"""The episode state machine of SEMANTICS.md §4 and the metrics of §5 on
hand-computed traces: every branch, live and batch."""

from __future__ import annotations

import pytest
from monitor_helpers import frames_from_strings, prop, run_live, run_signals, simple_suite


def result_of(tmp_path, signals, **kw):
    iset = simple_suite(tmp_path, prop(**kw))
    batch = run_signals(iset, signals)
    live = run_live(iset, signals)
    assert batch.to_dict() == live.to_dict()          # one code path, same answer
    return batch.instances[0]


def episodes(r):
    return [(e.start, e.end, e.recovered) for e in r.episodes]


def test_violation_then_recovery_then_second_violation(tmp_path):
    # G(a -> b): a without b violates; recovery F b closes the episode when b holds.
    r = result_of(tmp_path, {'a': '0100010000', 'b': '0000100000'})
    assert (r.triggers, r.violations) == (2, 2)
    # frame 1 violates, recovery F b holds at frame 4 → [1,4]; frame 5 violates again, never recovers.
    assert episodes(r) == [(1, 4, True), (5, 9, False)]
    assert r.unsafe_frames == 4 + 5 and r.frames == 10 and not r.pending


def test_recovery_in_the_same_frame(tmp_path):
    # Violation at frame 2; the recovery formula (F c) already holds on that frame.
    r = result_of(tmp_path, {'a': '00100', 'b': '00000', 'c': '00100'}, recovery='F c')
    assert episodes(r) == [(2, 2, True)] and r.unsafe_frames == 1 and r.violations == 1


def test_episode_opened_and_closed_on_one_frame_restarts_at_m0(tmp_path):
    # G(a -> X b): violation when b is missing after a.  Recovery 'true' closes at once.
    # The episode opened on the closing frame, so M restarts at m0 (§4 step 3): frame 2's
    # 'a' is the event this episode already counted and creates no new obligation.
    r = result_of(tmp_path, {'a': '0110000', 'b': '0000000'}, formula='G(a -> X b)', recovery='true')
    assert episodes(r) == [(2, 2, True)]
    assert r.violations == 1 and not r.pending


def test_restarted_main_dfa_reads_the_closing_frame(tmp_path):
    # G(a -> b), recovery F c.  a without b at 1 opens [1, ...]; c at 3 closes it.  M restarts
    # on frame 3 itself, m <- delta(m0, v_3): the new trigger a at 3 (no b) fails at once, so the
    # next episode opens on frame 4 (episodes never overlap) and never recovers.
    r = result_of(tmp_path, {'a': '0101000', 'b': '0000000', 'c': '0001000'}, recovery='F c')
    assert episodes(r) == [(1, 3, True), (4, 6, False)]
    assert (r.triggers, r.violations, r.unsafe_frames) == (2, 2, 3 + 3)
    # The same trigger on the closing frame with b true is checked and satisfied.
    r = result_of(tmp_path, {'a': '0101000', 'b': '0001000', 'c': '0001000'}, recovery='F c')
    assert episodes(r) == [(1, 3, True)]


def test_restarted_main_dfa_reads_the_closing_frame_with_pending_obligation(tmp_path):
    # G(a -> F b), strong end policy, recovery F c: the a on the closing frame 3 opens an
    # obligation that is still open at the end, so it counts (strong) at T-1.
    r = result_of(tmp_path, {'a': '0101', 'b': '0000', 'c': '0001'}, formula='G(a -> X b)',
                  recovery='F c', end_policy='strong')
    assert episodes(r) == [(2, 3, True), (3, 3, False)] and r.violations == 2


def test_restarted_main_dfa_failing_on_the_last_frame_is_a_one_frame_episode(tmp_path):
    # As above, but the trace ends on the closing frame: the restarted M is false at T-1,
    # which counts as a one-frame, unrecovered episode at T-1.
    r = result_of(tmp_path, {'a': '0101', 'b': '0000', 'c': '0001'}, recovery='F c')
    assert episodes(r) == [(1, 3, True), (3, 3, False)]
    assert r.violations == 2 and not r.pending


def test_open_at_end_of_trace(tmp_path):
    r = result_of(tmp_path, {'a': '00010', 'b': '00000'}, recovery='G b')
    # G b is presumably_false after frame 3 (b false) → never recovers; closes unrecovered at T-1.
    assert episodes(r) == [(3, 4, False)] and r.unsafe_frames == 2


def test_pending_weak_end_policy(tmp_path):
    r = result_of(tmp_path, {'a': '00010', 'b': '00000'}, formula='G(a -> F b)')
    assert r.violations == 0 and r.pending and episodes(r) == []


def test_pending_strong_end_policy_counts_a_violation(tmp_path):
    r = result_of(tmp_path, {'a': '00010', 'b': '00000'}, formula='G(a -> F b)', end_policy='strong')
    assert r.violations == 1 and not r.pending and episodes(r) == [(4, 4, False)] and r.unsafe_frames == 1


def test_satisfied_obligation_is_not_pending(tmp_path):
    r = result_of(tmp_path, {'a': '01000', 'b': '00010'}, formula='G(a -> F b)', end_policy='strong')
    assert r.violations == 0 and not r.pending


def test_not_pending_right_after_recovery_at_the_last_frame(tmp_path):
    # The main DFA restarts at the last frame and has read nothing: nothing is pending.
    r = result_of(tmp_path, {'a': '01', 'b': '00', 'c': '01'}, formula='G(a -> b)', recovery='F c',
                  end_policy='strong')
    assert episodes(r) == [(1, 1, True)] and r.violations == 1 and not r.pending


def test_vacuous_never_triggered_property(tmp_path):
    r = result_of(tmp_path, {'a': '00000', 'b': '11111'})
    assert r.triggers == 0 and r.violations == 0 and not r.triggered


def test_trigger_counts_rising_edges_only(tmp_path):
    r = result_of(tmp_path, {'a': '1110011', 'b': '1111111'})
    assert r.triggers == 2 and r.violations == 0


def test_unknown_uses_unknown_as_and_is_counted(tmp_path):
    # b unknown at frames 1-2: with unknown_as false, G(a -> b) is violated at frame 1.
    iset = simple_suite(tmp_path, prop(), unknown_true=())
    r = run_signals(iset, {'a': '0110', 'b': '0??1'}).instances[0]
    assert r.violations == 1 and r.unknown_any_frames == 2 and r.unknown_frames == {'a': 0, 'b': 2}
    # Declared unknown_as: true, the same unknown frames do not violate.
    iset = simple_suite(tmp_path, prop(), unknown_true=('b',))
    r = run_signals(iset, {'a': '0110', 'b': '0??1'}).instances[0]
    assert r.violations == 0 and r.unknown_frames == {'a': 0, 'b': 2}


def test_derived_predicates_feed_formulas(tmp_path):
    iset = simple_suite(tmp_path, prop(formula='G !s', trigger='a', recovery='F !s'),
                        derived='  s: held(a, 3)')
    r = run_signals(iset, {'a': '0111110011'}).instances[0]
    # held(a,3) true at frames 3,4,5; violation at 3, recovery F !s holds at 6.
    assert episodes(r) == [(3, 6, True)] and r.triggers == 2


@pytest.mark.parametrize('lengths', [[5, 3, 0, 1]])
def test_batch_rollouts_of_different_lengths(tmp_path, lengths):
    import numpy as np
    from monitor_helpers import frames_from_strings

    from safemanip_ros.monitor.core import Monitor
    iset = simple_suite(tmp_path, prop())
    signals = [{'a': '01000', 'b': '00000'}, {'a': '00100', 'b': '00000'}, {'a': '11111', 'b': '00000'},
               {'a': '10000', 'b': '10000'}]
    mon = Monitor(iset, batch=4)
    stacked = [frames_from_strings(mon.predicates, s) for s in signals]
    values = np.stack([v for v, _ in stacked])
    results = mon.run(values, None, lengths)
    assert [r.frames for r in results] == lengths
    assert [r.instances[0].violations for r in results] == [1, 1, 0, 0]
    assert results[0].instances[0].episodes[0].end == 4 and results[1].instances[0].episodes[0].end == 2


def test_live_step_reports_episode_events(tmp_path):
    from monitor_helpers import frames_from_strings

    from safemanip_ros.monitor.core import Monitor
    iset = simple_suite(tmp_path, prop())
    mon = Monitor(iset)
    values, _ = frames_from_strings(mon.predicates, {'a': '01000', 'b': '00010'})
    events = []
    for t in range(5):
        res = mon.step(values[t])
        events += [('open', e.instance, e.start) for e in res.opened]
        events += [('close', e.instance, e.start, e.end, e.recovered) for e in res.closed]
        assert res.verdicts.shape == (1, 1) and res.violated.shape == (1, 1)
        assert bool(res.violated[0, 0]) == (1 <= t < 3)
    assert events == [('open', 0, 1), ('close', 0, 1, 3, True)]
    assert mon.finish()[0].instances[0].violations == 1


def test_snapshot_reports_running_counts(tmp_path):
    from monitor_helpers import frames_from_strings

    from safemanip_ros.monitor.core import Monitor
    iset = simple_suite(tmp_path, prop())
    mon = Monitor(iset)
    values, _ = frames_from_strings(mon.predicates, {'a': '01000100', 'b': '00010000'})
    for t in range(6):
        mon.step(values[t])
    snap = mon.snapshot(0)
    # a at 1 violates [1,3]; a at 5 violates again and is still open at frame 5.
    assert snap.frames == 6 and snap.triggers == (2,) and snap.violations == (2,)
    assert snap.violated == (True,) and snap.open_start == (5,) and snap.unsafe_frames == (3,)
    assert snap.violated_count == 1


def test_episodes_read_like_the_list_of_named_tuples(tmp_path):
    """A result's episodes (kept as array slices, tuples made when first
    read) index, slice, compare and serialise as the list of Episode tuples."""
    import pickle

    from safemanip_ros.monitor import Episode, Episodes

    r = result_of(tmp_path, {'a': '0100010000', 'b': '0000100000'})
    eps = r.episodes
    assert isinstance(eps, Episodes)
    want = [Episode(1, 4, True), Episode(5, 9, False)]
    assert len(eps) == 2 and bool(eps)
    assert eps == want and want == eps and eps == tuple(want) and eps != want[:1] and eps != 'x'
    assert eps[0] == want[0] and eps[-1] == want[-1] and eps[0].frames == 4
    assert eps[1:] == want[1:] and isinstance(eps[1:], list)
    assert list(eps) == want and [e.start for e in eps] == [1, 5]
    assert type(eps[0].start) is int and type(eps[0].recovered) is bool
    assert eps.as_dicts() == [{'start': 1, 'end': 4, 'recovered': True}, {'start': 5, 'end': 9, 'recovered': False}]
    assert r.to_dict()['episodes'] == eps.as_dicts()
    assert repr(eps) == f'Episodes({want!r})'
    assert pickle.loads(pickle.dumps(eps)) == want
    with pytest.raises(IndexError):
        eps[2]
    with pytest.raises(TypeError):
        hash(eps)
    none = result_of(tmp_path, {'a': '0000', 'b': '0000'}).episodes
    assert len(none) == 0 and not none and none == [] and none.as_dicts() == [] and list(none) == []


def test_an_hour_of_violations_keeps_compact_records(tmp_path):
    """A live episode that runs for hours closes a few violation episodes most
    frames: they are merged into one record set as they accumulate (memory
    a few bytes per episode, not a small array each), with the same result."""
    from safemanip_ros.monitor import core
    n = 3 * core._COMPACT_CHUNKS + 7                  # closed episodes, one per two frames
    signals = {'a': '10' * n, 'b': '01' * n}
    r = result_of(tmp_path, signals)                  # batch and live (step by step) agree
    assert episodes(r) == [(2 * k, 2 * k + 1, True) for k in range(n)]
    iset = simple_suite(tmp_path, prop())
    mon = core.Monitor(iset)
    values, unknown = frames_from_strings(mon.predicates, signals)
    for k in range(2 * n):
        mon.step(values[k], unknown[k])
        assert len(mon._episode_chunks) < core._COMPACT_CHUNKS
    assert sum(ch[0].size for ch in mon._episode_chunks) == n


def test_a_monitor_that_keeps_no_episodes_counts_the_same_and_holds_nothing(tmp_path):
    """Live nodes (endless rollouts) keep counts only: the same triggers,
    violations and unsafe frames, no episode list, and nothing growing."""
    import numpy as np

    from safemanip_ros.monitor.core import Monitor
    iset = simple_suite(tmp_path, prop(formula='G(a -> b)', trigger='a', recovery='F b'))
    pattern = '1100011100' * 300                           # an episode every 10 frames, 3,000 frames
    signals = {'a': pattern, 'b': pattern.replace('1', 'x').replace('0', '1').replace('x', '0')}
    results = []
    for keep in (True, False):
        monitor = Monitor(iset, keep_episodes=keep)
        values, unknown = frames_from_strings(monitor.predicates, signals)
        for t in range(values.shape[0]):
            monitor.step(values[t], unknown[t])
        if not keep:
            assert monitor._episode_chunks == []
        results.append(monitor.finish()[0].instances[0])
    kept, counted = results
    assert kept.violations == counted.violations == 600 and len(kept.episodes) == 600
    assert (counted.triggers, counted.unsafe_frames) == (kept.triggers, kept.unsafe_frames)
    assert list(counted.episodes) == []
    assert np.sum([e.frames for e in kept.episodes]) == kept.unsafe_frames
