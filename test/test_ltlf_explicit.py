"""The explicit construction (ltlf.explicit, ltlf.antichains, ltlf.table, ltlf.nnf): the same minimal DFA
as the symbolic compiler, node for node, on random and bounded formulas; its
own parts (negation normal form, exact interning under forced hash
collisions, minimisation of arbitrary tables); and the choice ``'auto'``
makes.  Agreement with MONA is in test_ltlf_mona.py."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import formulas

from safemanip_ros.ltlf import DFA, antichains, compile_formula, parse, table
from safemanip_ros.ltlf import formula as fm
from safemanip_ros.ltlf.compiler import compile_reporting, construction_for
from safemanip_ros.ltlf.nnf import to_nnf

# Windows that interact (two counters or more), one window, delays, nesting.
BOUNDED = [
    'G(a -> F[0,{k}] (b & F[0,{k}] c))', 'G(a -> F[0,{k}] b) & G(c -> F[0,{j}] d)', 'G(a -> F[{j},{k}] b)',
    'G(a -> G[0,{k}] !c)', 'G(a -> F[0,{k}] b)', 'F[0,{k}] a & G[1,{k}] b', 'G(a -> (b U F[0,{k}] c))',
    'G(a -> F[0,{k}] b) | G(c -> G[0,{j}] b)', 'G(F[0,{k}] a -> G[0,{j}] b)', '!G(a -> F[0,{k}] b)',
    'G(a -> (F[0,{k}] b <-> F[0,{j}] c))', 'G(a -> F[0,{k}] G[0,{j}] b)', 'G(a -> G[0,{k}] F[0,{j}] b)',
    'G(a -> F[0,{j}] (b & F[0,{j}] (c & F[0,{j}] d)))', 'F[{k},{k}] a',
]


def _same(x: DFA, y: DFA) -> None:
    assert (x.formula, x.atoms, x.initial) == (y.formula, y.atoms, y.initial)
    assert x.accepting == y.accepting
    assert x.labels == y.labels
    assert (x.root, x.node_atom, x.node_low, x.node_high) == (y.root, y.node_atom, y.node_low, y.node_high)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formulas(atoms=('a', 'b', 'c', 'd'), max_leaves=7, max_bound=4))
def test_explicit_is_the_symbolic_dfa_node_for_node(f):
    _same(compile_formula(f, 'explicit'), compile_formula(f, 'symbolic'))


@pytest.mark.slow
@pytest.mark.parametrize('k', [1, 4, 9])
@pytest.mark.parametrize('template', BOUNDED)
def test_bounded_windows_same_dfa_both_ways(template, k):
    text = template.format(k=k, j=max(k - 3, 0))
    _same(compile_formula(text, 'explicit'), compile_formula(text, 'symbolic'))


@pytest.mark.slow
def test_nested_window_at_k_100_has_its_cubic_state_count():
    # About k³/6 states (176,853 at k = 100): with the symbolic compiler
    # about a minute; the explicit construction is what makes it usable.
    dfa = compile_formula('G(a -> F[0,100] (b & F[0,100] c))')
    assert dfa.num_states == 176_853
    small = 'G(a -> F[0,15] (b & F[0,15] c))'
    _same(compile_formula(small, 'explicit'), compile_formula(small, 'symbolic'))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(formulas(atoms=('a', 'b', 'c'), max_leaves=8, max_bound=3))
def test_negation_normal_form_is_equivalent_with_negations_on_atoms(f):
    g = to_nnf(f)
    for sub in g.subformulas():
        assert sub.op not in (fm.IMPLIES, fm.IFF)
        if sub.op == fm.NOT:
            assert sub.args[0].op == fm.ATOM, str(g)
    assert compile_formula(g, 'symbolic').num_states == compile_formula(f, 'symbolic').num_states
    assert _equivalent(compile_formula(g, 'symbolic'), compile_formula(f, 'symbolic'), f.atoms)


def _equivalent(x: DFA, y: DFA, atoms: frozenset[str]) -> bool:
    """Language equality by a product search over all letters of ``atoms``."""
    names = sorted(atoms)
    letters = [{n for n, bit in zip(names, bits) if bit} for bits in itertools.product((0, 1), repeat=len(names))]
    seen = {(x.initial, y.initial)}
    queue = deque(seen)
    while queue:
        p, q = queue.popleft()
        for step in letters:
            pair = (x.step(p, x.letter(step)), y.step(q, y.letter(step)))
            if x.accepting[pair[0]] != y.accepting[pair[1]]:
                return False
            if pair not in seen:
                seen.add(pair)
                queue.append(pair)
    return True


@pytest.mark.parametrize('pack_bits', [0, 62])
@pytest.mark.parametrize('text', ['G(a -> F[0,6] (b & F[0,6] c))', 'G(a -> F[2,7] b) & G(c -> G[0,5] !d)',
                                  '(a U F[0,3] b) R G[1,4] (c | F[0,2] d)'])
def test_interning_is_exact_when_every_hash_collides(monkeypatch, text, pack_bits):
    # Every antichain that is not packed into an exact key (pack_bits 0:
    # none is) gets the same hash, and so does every row the table code
    # groups: identity must then come from comparing contents.
    expected = compile_formula(text, 'explicit')
    monkeypatch.setattr(antichains, '_PACK_BITS', pack_bits)
    monkeypatch.setattr(antichains, 'mix_rows', lambda rows, skip_negative=False: np.zeros(len(rows), dtype=np.int64))
    monkeypatch.setattr(table, '_linear_hash', lambda rows: np.zeros(len(rows), dtype=np.uint64))
    # ... and every key probes from the same slot of every open-addressing table.
    monkeypatch.setattr(table, '_FIBONACCI', np.uint64(0))
    _same(compile_formula(text, 'explicit'), expected)
    _same(compile_formula(text, 'explicit'), compile_formula(text, 'symbolic'))


@pytest.mark.parametrize('multiplier', [None, 0])       # 0: every key probes from slot 0
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 40), max_size=60), max_size=8))
def test_key_index_is_a_dict(monkeypatch, multiplier, batches):
    """KeyIndex (open addressing, grown as it fills) gives what a dict gives,
    batch after batch of sets (new keys and replaced ones) and gets."""
    if multiplier is not None:
        monkeypatch.setattr(table, '_FIBONACCI', np.uint64(multiplier))
    index, reference = antichains.KeyIndex(), {}
    for k, batch in enumerate(batches):
        keys = np.array(list(dict.fromkeys(batch)), dtype=np.int64)
        probe = np.array(batch + [7, -7, 2**62], dtype=np.int64)
        assert index.get(probe).tolist() == [reference.get(x, -1) for x in probe.tolist()]
        assert index.get(probe, missing=-5).tolist() == [reference.get(x, -5) for x in probe.tolist()]
        values = np.arange(len(keys), dtype=np.int64) * 3 + k
        index.set(keys, values)
        reference.update(zip(keys.tolist(), values.tolist()))
    everything = np.array(list(reference), dtype=np.int64)
    assert index.get(everything).tolist() == list(reference.values())


@pytest.mark.parametrize('multiplier', [None, 0])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 20), max_size=300))
def test_group_equal_groups_as_unique_does(monkeypatch, multiplier, values):
    if multiplier is not None:
        monkeypatch.setattr(table, '_FIBONACCI', np.uint64(multiplier))
    x = np.array(values, dtype=np.int64)
    heads, group = table.group_equal(x)
    assert sorted(x[heads].tolist()) == sorted(set(values))           # one head per distinct value
    assert (x[heads[group]] == x).all()                               # each value's group holds its value


def _moore_classes(delta: np.ndarray, accepting: np.ndarray) -> int:
    """Number of Myhill-Nerode classes of the reachable part, by plain Moore
    refinement (the textbook loop, independent of table.refine)."""
    reach = {0}
    stack = [0]
    while stack:
        for t in delta[stack.pop()].tolist():
            if t not in reach:
                reach.add(t)
                stack.append(t)
    states = sorted(reach)
    cls = {s: int(accepting[s]) for s in states}
    while True:
        sig = {s: (cls[s], *(cls[t] for t in delta[s].tolist())) for s in states}
        ids: dict[tuple[int, ...], int] = {}
        new = {s: ids.setdefault(sig[s], len(ids)) for s in states}
        if len(ids) == len(set(cls.values())):
            return len(ids)
        cls = new


@st.composite
def tables(draw):
    n_atoms = draw(st.integers(0, 3))
    n = draw(st.integers(1, 25))
    delta = np.array(draw(st.lists(st.lists(st.integers(0, n - 1), min_size=1 << n_atoms, max_size=1 << n_atoms),
                                   min_size=n, max_size=n)), dtype=np.int64)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return n_atoms, delta, accepting


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(tables())
def test_minimal_dfa_of_any_table_is_minimal_equivalent_and_canonical(case):
    n_atoms, delta, accepting = case
    atoms = tuple('abc'[:n_atoms])
    dfa = table.minimal_dfa('', atoms, delta, accepting)
    assert dfa.num_states == _moore_classes(delta, accepting)
    # Same language: walk the product of the table and the DFA.
    seen = {(0, dfa.initial)}
    queue = deque(seen)
    while queue:
        s, q = queue.popleft()
        assert bool(accepting[s]) == dfa.accepting[q]
        for letter in range(1 << n_atoms):
            pair = (int(delta[s, letter]), dfa.step(q, letter))
            if pair not in seen:
                seen.add(pair)
                queue.append(pair)
    # Canonical: renumbering the table's states gives the very same DFA.
    perm = np.concatenate([[0], 1 + np.random.default_rng(len(delta)).permutation(len(delta) - 1)])
    inverse = np.argsort(perm)
    relabelled = table.minimal_dfa('', atoms, inverse[delta[perm]], accepting[perm])
    _same(relabelled, dfa)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(tables())
def test_letter_runs_count_the_letter_read_in_a_row_until_an_absorbing_set(case):
    n_atoms, delta, accepting = case
    # An absorbing set of seeds: the states from which no accepting state is reachable.
    labels = table.verdict_labels(table.Predecessors(delta), accepting)
    seeds = labels == table.Verdict.FALSE
    preds = table.Predecessors(delta)
    pred, start = preds.by_letter()
    n = len(delta)
    for letter in range(1 << n_atoms):
        for t in range(n):
            node = letter * n + t
            assert sorted(pred[start[node]:start[node + 1]].tolist()) == \
                [s for s in range(n) if delta[s, letter] == t]
    runs = table._letter_runs((pred, start), seeds)
    for letter in range(1 << n_atoms):
        for s in range(n):
            walked, count = s, 0
            while not seeds[walked] and count <= n:
                walked, count = int(delta[walked, letter]), count + 1
            assert runs[letter, s] == (count if seeds[walked] else -1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 300), min_size=6, max_size=6), min_size=1, max_size=40))
def test_packed_rows_are_equal_exactly_when_their_columns_are(rows):
    columns = [np.array(c, dtype=np.int64) for c in zip(*rows)] + [np.full(len(rows), 7)]
    packed = table._packed(columns)
    for i, j in itertools.combinations(range(len(rows)), 2):
        assert (packed[i] == packed[j]).all() == (rows[i] == rows[j])


def test_nested_window_needs_no_refinement_round(monkeypatch):
    """The runs of single letters tell every state of the nested window
    apart, so the minimal DFA is proved without a refinement round."""
    def refuse(*args):
        raise AssertionError('refined')
    monkeypatch.setattr(table, 'refine', refuse)
    dfa = compile_formula('G(a -> F[0,20] (b & F[0,20] c))', construction='explicit')
    assert dfa.num_states == compile_formula('G(a -> F[0,20] (b & F[0,20] c))', construction='symbolic').num_states


def test_auto_takes_the_explicit_construction_where_windows_interact():
    assert construction_for(parse('G(a -> F[0,100] (b & F[0,100] c))')) == 'explicit'
    assert construction_for(parse('G(a -> F[0,20] b) & G(c -> F[0,20] d)')) == 'explicit'
    assert construction_for(parse('G(a -> F[10,30] b)')) == 'explicit'       # a counter per frame of delay
    assert construction_for(parse('G(a -> F[0,1000] b)')) == 'symbolic'      # one window: a chain of states
    assert construction_for(parse('F[0,10000] a')) == 'symbolic'
    assert construction_for(parse('G(a -> F b)')) == 'symbolic'
    many = 'G(a1 -> F[0,3] (b & F[0,3] c)) & G(a2 | a3 | a4 | a5 | a6)'
    assert construction_for(parse(many)) == 'symbolic'                       # 8 atoms
    _same(compile_formula(many), compile_formula(many, 'symbolic'))


def test_explicit_refuses_what_it_cannot_tabulate_and_names_why():
    text = 'G(a -> F[0,2] (b & F[0,2] c)) & G(d | e | g | h)'
    with pytest.raises(ValueError, match=r'explicit construction cannot compile .*7 atoms'):
        compile_formula(text, 'explicit')
    with pytest.raises(ValueError, match='unknown construction'):
        compile_formula('G a', 'fast')
    _same(compile_formula(text), compile_formula(text, 'symbolic'))


def test_auto_falls_back_to_symbolic_where_keys_would_overflow():
    # Two window counters and 3 atoms, but 70 other obligations: 2^70
    # combinations do not fit the explicit construction's int64 keys.
    text = 'G(a -> F[0,3] (b & F[0,3] c)) & ' + ' & '.join(f'G(a -> {"X " * i}b)' for i in range(1, 70))
    assert construction_for(parse(text)) == 'explicit'
    with pytest.raises(ValueError, match='too many obligation combinations'):
        compile_formula(text, 'explicit')
    dfa, used = compile_reporting(text)
    assert used == 'symbolic'
    _same(dfa, compile_formula(text, 'symbolic'))
    assert compile_reporting('G(a -> F[0,3] (b & F[0,3] c))')[1] == 'explicit'


def test_steady_doubling_toward_a_long_delay_is_refused_early_and_short_ones_are_not():
    """The projection refuses only growth that, kept up to the end of the
    longest delay, passes the budget a hundred times over; a window whose
    delay ends first is explored (and compiled) in full."""
    from safemanip_ros.errors import StateBudgetError
    from safemanip_ros.ltlf import explicit
    tables = explicit.tabulate(parse('G(a -> F[40,60] b)'))
    with pytest.raises(StateBudgetError) as info:
        explicit.explore(tables, 500_000, delay_frames=40)
    assert info.value.projected is not None and info.value.projected > 5e7 and info.value.reached < 5000
    assert explicit._projected([1, 2, 4, 8, 16, 32], 63, delay_frames=5) == 0.0          # the delay is over
    assert explicit._projected([1, 2, 4, 8, 9, 10], 34, delay_frames=40) == 0.0          # growth levels off
    assert compile_formula('G(a -> F[12,20] b)', max_states=30_000).num_states > 2 ** 12
