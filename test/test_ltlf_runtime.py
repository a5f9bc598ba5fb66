"""Vectorised runtimes give exactly the states of step-by-step DFA.step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import formulas

from safemanip_ros.ltlf import compile_formula
from safemanip_ros.ltlf.runtime import DFABank, StepTable


def _reference_run(dfa, letters, start=None):
    s = dfa.initial if start is None else start
    out = []
    for letter in letters:
        s = dfa.step(s, int(letter))
        out.append(s)
    return out


@settings(max_examples=60, deadline=None)
@given(formulas(), st.integers(0, 2**32 - 1), st.sampled_from([1, 50, 5000, 20000]))
def test_step_table_run_matches_dfa_step(f, seed, length):
    dfa = compile_formula(f)
    rng = np.random.default_rng(seed)
    letters = rng.integers(0, 1 << len(dfa.atoms), size=length)
    # Runs of repeated letters as well as noise, like real predicate streams.
    letters = np.repeat(letters, rng.integers(1, 20, size=length))[:length]
    expected = _reference_run(dfa, letters)
    for max_atoms in (12, 0):   # dense table, and decision-diagram walk
        table = StepTable.from_dfa(dfa, max_table_atoms=max_atoms)
        assert table.run(letters).tolist() == expected


@settings(max_examples=30, deadline=None)
@given(st.lists(formulas(), min_size=1, max_size=8), st.integers(0, 2**32 - 1))
def test_bank_step_and_run_match_individual_dfas(fs, seed):
    dfas = [compile_formula(f) for f in fs]
    predicates = ['z_unused', 'a', 'b', 'c', 'd', 'e']
    rng = np.random.default_rng(seed)
    frames = rng.random((40, len(predicates))) < 0.4
    for max_atoms in (12, 2):   # all dense; mixed dense and diagram
        bank = DFABank(dfas, predicates, max_table_atoms=max_atoms)
        batch = bank.run(frames)
        live = np.array([bank.step(frame).copy() for frame in frames])
        assert (batch == live).all()
        for i, dfa in enumerate(dfas):
            cols = [predicates.index(a) for a in dfa.atoms]
            letters = [sum(int(frame[c]) << j for j, c in enumerate(cols)) for frame in frames]
            assert batch[:, i].tolist() == _reference_run(dfa, letters)
        labels = bank.labels(batch)
        for i, dfa in enumerate(dfas):
            assert labels[:, i].tolist() == [int(dfa.labels[s]) for s in batch[:, i]]


def test_bank_reset_and_unknown_predicate():
    dfas = [compile_formula('G a'), compile_formula('F b')]
    bank = DFABank(dfas, ['a', 'b'])
    bank.step(np.array([False, True]))
    assert bank.labels(bank.state).tolist() == [0, 1]   # G a false, F b true
    bank.reset(np.array([True, False]))
    assert bank.state.tolist() == [0, bank.state[1]]
    with pytest.raises(KeyError, match=r"\['q'\].*known: \['a', 'b'\]"):
        DFABank([compile_formula('G q')], ['a', 'b'])


def test_letters_from_matrix():
    dfa = compile_formula('a U b')
    table = StepTable.from_dfa(dfa)
    values = np.array([[True, False], [False, True], [True, True]])
    assert table.letters_from_matrix(values).tolist() == [1, 2, 3]
