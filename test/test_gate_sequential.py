"""The anytime-valid sequential gate (safemanip_ros/audit/sequential.py),
validated exactly by dynamic programming over the violation count — not by
simulation — with a check after every observation up to 2,000."""

from __future__ import annotations

import json
from html import escape as html_escape

import numpy as np
import pytest
from conftest import REPO, run_cli

from safemanip_ros.audit.gate import fixed_rule_boundary
from safemanip_ros.audit.sequential import FAIL, PASS, SequentialTest, exact_run, exact_stopping, family, replay

MAX_N = 2000


@pytest.mark.slow
@pytest.mark.parametrize('limit', [0.01, 0.05, 0.2])
def test_errors_stay_within_alpha_at_the_limit_checked_after_every_observation(limit):
    test = SequentialTest(limit, 0.05)
    at = exact_run(test, limit, MAX_N)
    assert at.pass_by[-1] <= 0.05 and at.fail_by[-1] <= 0.05, (at.pass_by[-1], at.fail_by[-1])
    # Worse than the limit passes even less often; better fails even less often.
    assert exact_run(test, limit * 1.5, MAX_N).pass_by[-1] <= at.pass_by[-1]
    assert exact_run(test, limit / 1.5, MAX_N).fail_by[-1] <= at.fail_by[-1]


@pytest.mark.slow
@pytest.mark.parametrize('limit, alpha', [(0.05, 0.05), (0.05, 0.05 / 8), (0.5, 0.1), (0.9, 0.2)])
def test_the_boundaries_are_those_of_a_scan_of_every_count(limit, alpha):
    """boundaries() follows each boundary one step at a time (it moves by at
    most one violation per observation); scanning every count at every n
    finds the same ones."""
    test = SequentialTest(limit, alpha)
    pass_k, fail_k = test.boundaries(600)
    for n in range(1, 601):
        k = np.arange(n + 1)
        passes = np.flatnonzero(test.log_evidence(n, k, above=False) >= test.threshold)
        fails = np.flatnonzero(test.log_evidence(n, k, above=True) >= test.threshold)
        assert pass_k[n - 1] == (passes.max() if len(passes) else -1), n
        assert fail_k[n - 1] == (fails.min() if len(fails) else n + 1), n
    assert (pass_k >= 0).any() and (fail_k <= np.arange(1, 601)).any()    # both boundaries were met


def test_a_fixed_sample_rule_rechecked_after_every_trigger_does_not():
    """Today's rule (Clopper-Pearson upper bound below the limit, 30
    triggers at least) looked at after every trigger passes a policy at the
    limit far more often than 5 %: the reason for the sequential test."""
    limit, n_max = 0.05, 1000
    passed = exact_stopping(fixed_rule_boundary(n_max, limit), None, limit, n_max).pass_by[-1]
    assert passed > 2 * 0.05, passed       # 13 % by 1,000 triggers
    assert exact_run(SequentialTest(limit, 0.05), limit, n_max).pass_by[-1] <= 0.05


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize('rate', [0.0, 0.02, 0.05, 0.3])
def test_running_bounds_cross_a_limit_when_its_test_decides(rate):
    """The report's confidence sequence and the gate's test are one thing:
    the upper bound is at or below a limit on its grid exactly from the
    batch where that limit's PASS test passes (and the lower bound above it
    from where its FAIL test fails)."""
    from safemanip_ros.audit.sequential import running_bounds
    rng = np.random.default_rng(int(rate * 100))
    batches = [(int(n), int(rng.binomial(n, rate))) for n in rng.integers(0, 4, 300)]
    grid = np.array([0.01, 0.03, 0.05, 0.1, 0.2, 0.4])
    bounds = running_bounds(batches, 0.05, grid)
    for limit in grid:
        test = SequentialTest(float(limit), 0.05)
        n = k = 0
        passed = failed = False
        for i, (obs, viol) in enumerate(batches):
            n, k = n + obs, k + viol
            passed |= n > 0 and test.decide(n, k) == PASS
            failed |= n > 0 and float(test.log_evidence(n, k, above=True)) >= test.threshold
            assert (bounds.upper[i] <= limit) == passed, (limit, i)
            assert (bounds.lower[i] >= limit) == failed, (limit, i)


SCENE = ('--scene', str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'),
         '--only', 'reach_in_fixture_only_when_fully_open')


def _batch_trace(path, clean: int, violating: int) -> None:
    """A JSONL batch of rollouts: each reaches into the microwave once, a
    violating one while its door is not fully open."""
    ok = '[["fixture_fully_open_microwave"], ["reach_in_microwave", "fixture_fully_open_microwave"], []]'
    bad = '[[], ["reach_in_microwave"], []]'
    path.write_text('\n'.join([ok] * clean + [bad] * violating) + '\n')


@pytest.mark.parametrize('clean, violating, decision', [(90, 0, 'PASS'), (10, 20, 'FAIL')])
def test_audit_draws_the_sequential_section_gate_sequential_decides(tmp_path, clean, violating, decision):
    _batch_trace(tmp_path / 'batch.jsonl', clean, violating)
    out = tmp_path / 'out'
    proc = run_cli('audit', str(tmp_path / 'batch.jsonl'), '--out', str(out), '--quiet', *SCENE, '--max-rate', 'enclosure_access=0.05', '--unit', 'rollout')
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / 'report.json').read_text())
    (row,) = report['sequential']['limits']
    assert row['name'] == 'enclosure_access' and row['decision'] == decision and row['rollouts'] == clean + violating
    gate = run_cli('gate', str(out / 'report.json'), '--sequential', '--unit', 'rollout',
                   '--max-rate', 'enclosure_access=0.05')
    line = next(x for x in gate.stdout.splitlines() if x.startswith('enclosure_access'))
    assert decision in line and f'{row["after_observations"]} rollouts' in line, gate.stdout
    assert f'sequential: enclosure_access limit 0.05: {decision} after {row["after_observations"]}' in proc.stdout
    html = (out / 'report.html').read_text()
    assert 'Sequential gate: running bound against each limit' in html
    # The same plain sentence heads report.html and is what gate --sequential says.
    assert row['summary'].startswith(f'{decision}: enclosure_access (fleet): ') and \
        f'<p class="decision">{html_escape(row["summary"])}</p>' in html, row["summary"]
    assert row['summary'] in gate.stdout.splitlines() and f'  {row["summary"]}' in proc.stdout.splitlines()
    assert (out / 'sequential.csv').read_text().splitlines()[1].startswith('enclosure_access,rollout,category,0.05')


def test_audit_with_an_unknown_limit_writes_the_report_then_names_the_known(tmp_path):
    _batch_trace(tmp_path / 'batch.jsonl', 3, 0)
    proc = run_cli('audit', str(tmp_path / 'batch.jsonl'), '--out', str(tmp_path / 'out'), '--quiet', *SCENE,
                   '--max-rate', 'enclosure_acess=0.05')
    assert proc.returncode == 2 and 'enclosure_access' in proc.stderr and 'without its sequential' in proc.stderr
    assert 'sequential' not in json.loads((tmp_path / 'out' / 'report.json').read_text())
    bad = run_cli('audit', str(tmp_path / 'batch.jsonl'), '--out', str(tmp_path / 'out2'), '--max-rate', 'x=2')
    assert bad.returncode == 2 and 'strictly between 0 and 1' in bad.stderr and not (tmp_path / 'out2').exists()


def test_an_undecided_gate_says_in_plain_words_how_many_clean_rollouts_would_pass(tmp_path):
    """Not 'evidence (log, need 3.69) below -1.16': the decision, the counts, the
    bound against the limit, and how many more clean ones would decide; the
    number is checked by running the gate with that many more (it passes) and
    one fewer (it does not)."""
    import re
    path = tmp_path / 'report.json'
    path.write_text(json.dumps(_report([0] * 20, [1] * 20)))
    proc = run_cli('gate', str(path), '--sequential', '--max-rate', 'p=0.05')
    assert proc.returncode == 4, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith('UNDECIDED: p (fleet)'))
    m = re.fullmatch(r'UNDECIDED: p \(fleet\): 0 of 20 triggers violated in 20 rollouts, bound ([\d.]+) > limit 0\.05 '
                     r'\(alpha 0\.05\); about (\d+) more clean triggers \(~(\d+) rollouts at 1 a rollout\) would pass',
                     line)
    assert m and float(m.group(1)) > 0.05, line
    more = int(m.group(2))
    for extra, code in ((more, 0), (more - 1, 4)):
        path.write_text(json.dumps(_report([0] * (20 + extra), [1] * (20 + extra))))
        proc = run_cli('gate', str(path), '--sequential', '--max-rate', 'p=0.05')
        assert proc.returncode == code, (extra, proc.stdout)
