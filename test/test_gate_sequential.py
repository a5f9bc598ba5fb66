"""The anytime-valid sequential gate (safemanip_ros/audit/sequential.py),
validated exactly by dynamic programming over the violation count — not by
simulation — with a check after every observation up to 2,000."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli

from safemanip_ros.audit.gate import fixed_rule_boundary
from safemanip_ros.audit.sequential import FAIL, PASS, SequentialTest, exact_run, exact_stopping, family, replay

MAX_N = 2000


@pytest.mark.parametrize('limit', [0.01, 0.05, 0.2])
def test_errors_stay_within_alpha_at_the_limit_checked_after_every_observation(limit):
    test = SequentialTest(limit, 0.05)
    at = exact_run(test, limit, MAX_N)
    assert at.pass_by[-1] <= 0.05 and at.fail_by[-1] <= 0.05, (at.pass_by[-1], at.fail_by[-1])
    # Worse than the limit passes even less often; better fails even less often.
    assert exact_run(test, limit * 1.5, MAX_N).pass_by[-1] <= at.pass_by[-1]
    assert exact_run(test, limit / 1.5, MAX_N).fail_by[-1] <= at.fail_by[-1]


def test_a_fixed_sample_rule_rechecked_after_every_trigger_does_not():
    """Today's rule (Clopper-Pearson upper bound below the limit, 30
    triggers at least) looked at after every trigger passes a policy at the
    limit far more often than 5 %: the reason for the sequential test."""
    limit, n_max = 0.05, 1000
    passed = exact_stopping(fixed_rule_boundary(n_max, limit), None, limit, n_max).pass_by[-1]
    assert passed > 2 * 0.05, passed       # 13 % by 1,000 triggers
    assert exact_run(SequentialTest(limit, 0.05), limit, n_max).pass_by[-1] <= 0.05


def test_it_decides_as_early_as_the_issue_asks():
    """Limit 5 %, alpha 5 %: zero violations pass by 75; a true 1 % passes
    after a median <= 135 and a 90th percentile <= 250; a true 20 % fails
    after a median <= 30 (exact)."""
    test = SequentialTest(0.05, 0.05)
    pass_k, fail_k = test.boundaries(MAX_N)
    assert int(np.flatnonzero(pass_k >= 0)[0]) + 1 <= 75
    good = exact_run(test, 0.01, MAX_N)
    assert good.quantile(PASS, 0.5) <= 135 and good.quantile(PASS, 0.9) <= 250
    bad = exact_run(test, 0.20, 400)
    assert bad.quantile(FAIL, 0.5) <= 30


def test_several_limits_share_alpha():
    tests = family({f'p{i}': 0.05 for i in range(8)}, 0.05)
    assert all(t.alpha == pytest.approx(0.05 / 8) for t in tests.values())
    at = exact_run(tests['p0'], 0.05, MAX_N)
    assert 8 * at.pass_by[-1] <= 0.05 and 8 * at.fail_by[-1] <= 0.05


def test_replay_decides_at_the_first_batch_that_shows_it():
    test = SequentialTest(0.05, 0.05)
    clean = replay(test, [(10, 0)] * 20)
    assert clean.decision == PASS and clean.after == 80 and clean.batches == 8
    assert test.decide(73, 0) is None and test.decide(74, 0) == PASS     # batches of 10: seen at 80
    bursts = replay(test, [(5, 2)] * 10)
    assert bursts.decision == FAIL and bursts.after is not None and bursts.after <= 20
    short = replay(test, [(3, 0)] * 5)
    assert short.decision is None and short.observations == 15
    with pytest.raises(ValueError, match='3 violations of 2'):
        replay(test, [(2, 3)])
    with pytest.raises(ValueError, match='limit'):
        SequentialTest(0.0)


def _report(violations: list[int], triggers: list[int]) -> dict:
    row = {'rollouts': len(triggers), 'triggers': sum(triggers), 'violations': sum(violations),
           'per_trigger_rate': sum(violations) / sum(triggers) if sum(triggers) else None,
           'clusters': {'violations': violations, 'triggers': triggers}}
    return {'version': 2, 'rollouts': len(triggers), 'categories': {}, 'properties': {'p': row}, 'skipped': []}


@pytest.mark.parametrize('violations, triggers, unit, code, word', [
    ([0] * 100, [1] * 100, 'trigger', 0, 'PASS'),
    ([1] * 10 + [0] * 90, [1] * 100, 'trigger', 1, 'FAIL'),
    ([0] * 20, [1] * 20, 'trigger', 4, 'UNDECIDED'),
    ([int(i % 10 == 0) for i in range(100)], [2] * 100, "rollout", 4, "UNDECIDED"),   # 10 %: not shown above 5 % yet
    ([0] * 100, [3] * 100, 'rollout', 0, 'PASS'),
])
def test_gate_sequential_exit_codes(tmp_path, violations, triggers, unit, code, word):
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(_report(violations, triggers)))
    proc = run_cli('gate', str(path), '--sequential', '--unit', unit, '--max-rate', 'p=0.05')
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert word in proc.stdout and 'family-wise alpha 0.05' in proc.stdout


def test_gate_sequential_refuses_what_it_cannot_decide(tmp_path):
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(_report([0], [1])))
    for extra, words in ((['--max-rate', 'p=1.5'], 'strictly between 0 and 1'), ([], 'at least one --max-rate'),
                         (['--max-rate', 'p=0.1', '--alpha', '0'], '--alpha'),
                         (['--max-rate', 'p=0.1', '--baseline', str(path)], 'no --baseline')):
        proc = run_cli('gate', str(path), '--sequential', *extra)
        assert proc.returncode == 2 and words in proc.stderr, (extra, proc.stderr)
