"""The shipped SpecRLBench suite loads, every formula in it is among those
checked against MONA, and it monitors a rollout as documented."""

from __future__ import annotations

from conftest import REPO
from monitor_helpers import run_signals

from safemanip_ros.ltlf import parse
from safemanip_ros.spec.suite import instantiate, load_suite

SUITE = load_suite(REPO / 'config' / 'properties' / 'specrlbench.yaml')


def test_formulas_are_mona_checked():
    checked = {parse(line.strip()) for line in (REPO / 'test' / 'data' / 'specrlbench_finite.txt').read_text()
               .splitlines() if line.strip() and not line.startswith('#')}
    assert len(SUITE.properties) >= 50
    for p in SUITE.properties:
        assert parse(p.formula) in checked, p.name


def test_reach_avoid_violation_and_pending():
    iset = instantiate(SUITE, only=['letter_01'])
    assert str(iset.instances[0].formula) == '!(a | b) U (c & !(d | e) U f)'
    # Reach c then f without touching a/b before c or d/e before f: satisfied.
    ok = run_signals(iset, {'c': '0100', 'f': '0001'}).instances[0]
    assert (ok.triggers, ok.violations, ok.pending) == (1, 0, False)
    # Touch 'a' before reaching c: violated (avoid broken), episode open to the end.
    bad = run_signals(iset, {'a': '0100', 'c': '0010'}).instances[0]
    assert bad.violations == 1 and [(e.start, e.end, e.recovered) for e in bad.episodes] == [(1, 3, False)]
    # Never reach c: nothing broken, but the task is unfinished → pending.
    unfinished = run_signals(iset, {'c': '0000'}).instances[0]
    assert unfinished.violations == 0 and unfinished.pending
