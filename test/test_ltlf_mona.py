"""Differential tests against SafeManip's toolchain, ltlf2dfa + MONA.

Language equivalence is decided by a complete product construction
(``reference.counterexample``), not by sampling traces.  Needs the Debian
package ``mona`` (installed by tools/setup_env.sh where it runs as root) and
the PyPI package ``ltlf2dfa``; without them these tests fail, loudly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from ltlf_semantics import holds
from strategies import formulas

from safemanip_ros.ltlf import compile_formula, parse
from safemanip_ros.ltlf.reference import counterexample, mona_dfa, parse_mona, to_ltlf2dfa

DATA = Path(__file__).parent / 'data'
pytestmark = pytest.mark.mona


def _formulas(name: str) -> list[str]:
    return [line.strip() for line in (DATA / name).read_text().splitlines()
            if line.strip() and not line.startswith('#')]


def test_mona_is_installed():
    assert shutil.which('mona'), 'install the Debian package mona (tools/setup_env.sh does it as root)'


def _assert_equivalent(text: str, construction: str = 'auto') -> None:
    f = parse(text)
    cex = counterexample(compile_formula(f, construction), mona_dfa(f))
    assert cex is None, f'{text}: disagree on {[sorted(s) for s in cex]}; truth: {holds(f, cex)}'


@pytest.mark.parametrize('text', _formulas('safemanip_formulas.txt'))
def test_safemanip_properties_and_recoveries_match_mona(text):
    _assert_equivalent(text)


@pytest.mark.parametrize('text', _formulas('specrlbench_finite.txt'))
def test_specrlbench_finite_formulas_match_mona(text):
    _assert_equivalent(text)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formulas(max_leaves=7, max_bound=2))
def test_random_formulas_over_five_atoms_match_mona(f):
    _assert_equivalent(str(f))


def test_counterexample_finds_a_real_difference():
    # The checker must be able to fail: G a against MONA's automaton for F a.
    cex = counterexample(compile_formula('G a'), mona_dfa(parse('F a')))
    assert cex is not None
    assert holds(parse('G a'), cex) != holds(parse('F a'), cex)


def test_rewrites_for_operators_ltlf2dfa_lacks():
    assert to_ltlf2dfa(parse('a W b')) == '(((a) U (b)) | G(a))'
    assert to_ltlf2dfa(parse('F[1,2] a')) == 'X(((a) | X((a))))'
    assert to_ltlf2dfa(parse('G[0,1] a')) == '((a) & WX((a)))'


def test_parse_mona_output():
    text = ('DFA for formula with free variables: A B \nInitial state: 0\nAccepting states: 1 \n'
            'Rejecting states: 0 2 \n\nAutomaton has 3 states and 4 BDD-nodes\nTransitions:\n'
            'State 0: XX -> state 1\nState 1: 0X -> state 1\nState 1: 10 -> state 2\n'
            'State 1: 11 -> state 1\nState 2: X0 -> state 2\nState 2: X1 -> state 1\n')
    m = parse_mona(text)
    assert m.atoms == ('a', 'b') and m.accepting == {1}
    assert m.table(('a', 'b'))[1].tolist() == [1, 2, 1, 1]


# Bounded windows: the compiler keeps obligations in normal form by subsumption
# (F[0,i] p & F[0,j] p = F[0,min(i,j)] p), so these must still agree with MONA.
BOUNDED_TEMPLATES = [
    'G(a -> F[0,{k}] b)', 'G(a -> G[0,{k}] !c)', 'G(a -> F[0,{k}] (b & F[0,{k}] c))',
    'G(a -> F[1,{k}] b)', 'G(a -> G[1,{k}] b)', 'F[0,{k}] a & G[1,{k}] b', 'G(a -> (b U F[0,{k}] c))',
    'G(a -> F[0,{k}] b) & G(c -> F[0,{j}] b)', 'G(a -> F[0,{k}] b) | G(c -> G[0,{j}] b)',
    'G(a -> WX F[0,{k}] b)', 'G(F[0,{k}] a -> G[0,{j}] b)', '!G(a -> F[0,{k}] b)',
    'G(a -> (F[0,{k}] b <-> F[0,{j}] c))', 'G(a -> F[0,{k}] G[0,{j}] b)', 'G(a -> G[0,{k}] F[0,{j}] b)',
]


@pytest.mark.parametrize('construction', ['symbolic', 'explicit'])
@pytest.mark.parametrize('k', [2, 3, 5])
@pytest.mark.parametrize('template', BOUNDED_TEMPLATES)
def test_bounded_windows_match_mona(template, k, construction):
    _assert_equivalent(template.format(k=k, j=max(k - 2, 0)), construction)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formulas(atoms=('a', 'b', 'c'), max_leaves=6, max_bound=4))
def test_random_bounded_formulas_over_three_atoms_match_mona(f):
    _assert_equivalent(str(f))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formulas(atoms=('a', 'b', 'c', 'd'), max_leaves=7, max_bound=4))
def test_random_formulas_compiled_explicitly_match_mona(f):
    _assert_equivalent(str(f), 'explicit')
