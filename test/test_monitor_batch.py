"""Batch (many rollouts at once) and frame-by-frame live runs agree exactly
on random traces, for every property of the SafeManip suite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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
