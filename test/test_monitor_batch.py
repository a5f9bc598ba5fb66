"""Batch (many rollouts at once) and frame-by-frame live runs agree exactly
on random traces, for every property of the SafeManip suite, and both agree
with a literal scalar transcription of SEMANTICS.md §4 (including step 3's
restart of the main DFA on the closing frame)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from monitor_helpers import reference_run

from safemanip_ros.monitor.core import Monitor
from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate, load_suite

REPO = Path(__file__).resolve().parents[1]
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


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_batch_equals_scalar_reference_of_section_4(seed):
    B, T = 3, 160
    values, unknown, lengths = _signals(seed, B, T)
    batch = Monitor(ISET, batch=B).run(values, unknown, lengths)
    for b in range(B):
        n = int(lengths[b])
        assert _summary(batch[b]) == reference_run(LIVE, values[b, :n], unknown[b, :n])


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
