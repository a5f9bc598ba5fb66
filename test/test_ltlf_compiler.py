"""The compiler: exact semantics (against a direct evaluator), minimality,
verdict labels, deterministic numbering, export and cache."""

from __future__ import annotations

import json
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ltlf_semantics import holds
from strategies import formulas, traces

from safemanip_ros.ltlf import DFA, Verdict, compile_formula, parse
from safemanip_ros.ltlf.cache import compile_cached


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(formulas(), st.lists(traces(), min_size=1, max_size=6))
def test_dfa_agrees_with_direct_semantics_on_every_prefix(f, trace_list):
    dfa = compile_formula(f)
    for trace in trace_list:
        state = dfa.initial
        for t, step in enumerate(trace):
            state = dfa.step(state, dfa.letter(step))
            assert dfa.accepting[state] == holds(f, trace[:t + 1]), (str(f), trace[:t + 1])


def _distinguishable(dfa: DFA, p: int, q: int) -> bool:
    """Breadth-first search for a word telling states p and q apart."""
    seen = {(p, q)}
    queue = deque([(p, q)])
    letters = range(1 << len(dfa.atoms))
    while queue:
        x, y = queue.popleft()
        if dfa.accepting[x] != dfa.accepting[y]:
            return True
        for letter in letters:
            pair = (dfa.step(x, letter), dfa.step(y, letter))
            if pair not in seen:
                seen.add(pair)
                queue.append(pair)
    return False


@settings(max_examples=150, deadline=None)
@given(formulas(atoms=('a', 'b', 'c')))
def test_minimal_no_two_states_equivalent(f):
    dfa = compile_formula(f)
    for p in dfa.states:
        for q in range(p + 1, dfa.num_states):
            assert _distinguishable(dfa, p, q), (str(f), p, q)


def _reachable(dfa: DFA, s: int) -> set[int]:
    seen = {s}
    stack = [s]
    while stack:
        for t in dfa.successors(stack.pop()):
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(formulas())
def test_verdict_labels_consistent_with_reachability(f):
    dfa = compile_formula(f)
    for s in dfa.states:
        reach = _reachable(dfa, s)
        all_acc = all(dfa.accepting[t] for t in reach)
        none_acc = not any(dfa.accepting[t] for t in reach)
        label = dfa.labels[s]
        if all_acc:
            assert label is Verdict.TRUE
        elif none_acc:
            assert label is Verdict.FALSE
        else:
            assert label is (Verdict.PRESUMABLY_TRUE if dfa.accepting[s] else Verdict.PRESUMABLY_FALSE)


@settings(max_examples=100, deadline=None)
@given(formulas())
def test_complete_and_deterministic_numbering(f):
    d1, d2 = compile_formula(f), compile_formula(str(f))
    assert (d1.root, d1.node_atom, d1.node_low, d1.node_high, d1.accepting) == \
           (d2.root, d2.node_atom, d2.node_low, d2.node_high, d2.accepting)
    assert d1.initial == 0
    for s in d1.states:   # complete: every letter has a successor in range
        for letter in range(1 << len(d1.atoms)):
            assert 0 <= d1.step(s, letter) < d1.num_states


def test_known_sizes():
    assert compile_formula('G a').num_states == 3          # initial, ok, violated
    assert compile_formula('a U b').num_states == 3
    assert compile_formula('false').num_states == 1
    # Reach-avoid with n stages has 2**n + 1 states.
    inner = '(!a3 U b3)'
    for i in (2, 1):
        inner = f'(!a{i} U (b{i} & {inner}))'
    assert compile_formula(inner).num_states == 2 ** 3 + 1


def test_large_alphabet_compiles_without_enumerating_letters():
    # 24 atoms: 2**24 letters per state would be hopeless; symbolic transitions are not.
    f = ' & '.join(f'G(p{i} -> F q{i})' for i in range(3)) + ' & ' + \
        ' & '.join(f'G !x{i}' for i in range(18))
    dfa = compile_formula(f)
    assert len(dfa.atoms) == 24
    assert dfa.num_states == 2 ** 3 + 2  # pending-set states plus initial and violated sink
    assert dfa.compile_time_s < 30


def test_json_round_trip_and_dot():
    dfa = compile_formula('G(a -> X(b U c))')
    data = json.loads(dfa.to_json())
    assert data['formula'] == 'G (a -> X (b U c))'
    again = DFA.from_dict(data)
    assert (again.root, again.accepting, again.labels) == (dfa.root, dfa.accepting, dfa.labels)
    dot = dfa.to_dot()
    assert dot.startswith('digraph DFA {') and '__start -> 0' in dot
    for s in dfa.states:
        assert f'  {s} [shape=' in dot


def test_cache_reuses_and_survives_corruption(tmp_path):
    d1 = compile_cached('G(a -> F b)', tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1
    d2 = compile_cached('G (a -> F b)', tmp_path)    # same canonical formula
    assert d2.compile_time_s == 0 and d2.root == d1.root
    files[0].write_text('{not json')
    d3 = compile_cached('G(a -> F b)', tmp_path)
    assert d3.root == d1.root and json.loads(files[0].read_text())['formula'] == 'G (a -> F b)'


@pytest.mark.parametrize('text', ['G(a -> F b)', 'a U b', 'F[1,3] a & G[0,2] !b'])
def test_accepts_matches_semantics(text):
    dfa = compile_formula(text)
    f = parse(text)
    for trace in ([{'a'}], [set(), {'b'}], [{'a'}, {'b'}, set(), {'a', 'b'}]):
        trace = [frozenset(s) for s in trace]
        assert dfa.accepts([dfa.letter(s) for s in trace]) == holds(f, trace)


@pytest.mark.parametrize('k', [20, 100, 1000])
def test_bounded_response_windows_are_linear(k):
    """``G(a -> F[0,k] b)`` and ``G(a -> G[0,k] !c)`` have k + 2 states after the
    first frame (idle, one per remaining deadline 1..k, the sink) plus the
    initial state that has read nothing, and they are reached without
    enumerating subsets of pending deadlines (k = 1000 would not finish)."""
    for text in (f'G(a -> F[0,{k}] b)', f'G(a -> G[0,{k}] !c)', f'F[0,{k}] a'):
        assert compile_formula(text).num_states == k + 3, text


def test_bounded_response_window_semantics_at_k_100():
    dfa = compile_formula('G(a -> F[0,100] b)')
    trigger = [{'a'}] + [set()] * 99                                          # frames 0..99
    assert dfa.accepts([dfa.letter(s) for s in trigger + [{'b'}]])          # b on the last frame of the window
    assert not dfa.accepts([dfa.letter(s) for s in trigger + [set(), {'b'}]])  # one frame late
    # Two overlapping triggers: the earlier deadline decides (F[0,i] & F[0,j] = F[0,min]).
    two = [{'a'}] + [set()] * 9 + [{'a'}] + [set()] * 95 + [{'b'}]
    assert not dfa.accepts([dfa.letter(s) for s in two])


def test_nested_bounded_window_size_is_cubic_and_minimal():
    # The minimal DFA of G(a -> F[0,k] (b & F[0,k] c)) grows as k^3 (the earliest b-deadline of
    # triggers without a b, the earliest b-deadline of those with one, and the c-deadline):
    # the compiler is exact here, not approximate.
    sizes = [compile_formula(f'G(a -> F[0,{k}] (b & F[0,{k}] c))').num_states for k in (2, 3, 4, 5)]
    assert sizes == [12, 22, 37, 58]
