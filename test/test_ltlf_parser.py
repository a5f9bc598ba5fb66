"""Parser and canonical printer (SEMANTICS.md §2)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from strategies import formulas

from safemanip_ros.errors import LtlfSyntaxError
from safemanip_ros.ltlf import formula as fm
from safemanip_ros.ltlf import parse


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(formulas(max_leaves=12))
def test_print_then_parse_is_identity(f):
    assert parse(str(f)) is f


@settings(max_examples=200, deadline=None)
@given(formulas())
def test_pickle_preserves_identity(f):
    assert pickle.loads(pickle.dumps(f)) is f


a, b, c, d = (fm.Atom(x) for x in 'abcd')


@pytest.mark.parametrize('text, expected', [
    ('a U b U c', fm.Until(a, fm.Until(b, c))),                  # U is right-associative
    ('a R b R c', fm.Release(a, fm.Release(b, c))),
    ('a -> b -> c', fm.Implies(a, fm.Implies(b, c))),
    ('a & b & c', fm.And(fm.And(a, b), c)),                      # & and | are left-associative
    ('a | b & c', fm.Or(a, fm.And(b, c))),                       # & binds tighter than |
    ('a & b U c', fm.And(a, fm.Until(b, c))),                    # U binds tighter than &
    ('a U b R c', fm.Until(a, fm.Release(b, c))),                # R binds tighter than U
    ('a W b U c', fm.WeakUntil(a, fm.Until(b, c))),              # U and W share a level, right-assoc
    ('!a U b', fm.Until(fm.Not(a), b)),                          # unary binds tightest
    ('G a -> F b', fm.Implies(fm.Always(a), fm.Eventually(b))),
    ('X WX a', fm.Next(fm.WeakNext(a))),
    ('F[2,5] a', fm.Eventually(a, (2, 5))),
    ('G [0, 3] !a', fm.Always(fm.Not(a), (0, 3))),
    ('a <-> b | c', fm.Iff(a, fm.Or(b, c))),
    ('(a <-> b) <-> c', fm.Iff(fm.Iff(a, b), c)),
    ('a -> b <-> c', fm.Iff(fm.Implies(a, b), c)),
    ('true & false | last', fm.Or(fm.And(fm.TT, fm.FF), fm.LAST_F)),
    ('  object_grasped_2   ', fm.Atom('object_grasped_2')),
])
def test_precedence_and_associativity(text, expected):
    assert parse(text) is expected


@pytest.mark.parametrize('text, position, expected', [
    ('a &', 3, 'expected an atom'),
    ('a & (b U c', 10, "expected ')'"),
    ('a <-> b <-> c', 8, 'chain of <-> needs parentheses'),
    ('Gx', 0, "unknown operator 'Gx'"),
    ('a $ b', 2, "unexpected character '$'"),
    ('F[3,1] a', 1, 'bounds [3,1] need a <= b'),
    ('F[a,3] b', 2, 'non-negative integer lower bound'),
    ('a b', 2, 'expected a binary operator'),
    ('', 0, 'expected a formula'),
    ('Foo', 0, "unknown operator 'Foo'"),
])
def test_errors_name_position_and_expectation(text, position, expected):
    with pytest.raises(LtlfSyntaxError) as info:
        parse(text)
    err = info.value
    assert err.position == position
    assert expected in err.message
    lines = str(err).split('\n')
    assert lines[0].endswith(f'at position {position}')
    assert lines[2].index('^') - 2 == position   # caret under the offending character


def test_hash_consing_and_immutability():
    assert parse('G(a -> F b)') is parse('G (a->F  b)')
    f = parse('a')
    with pytest.raises(AttributeError):
        f.name = 'b'


def test_atoms_and_subformulas():
    f = parse('G(a -> (b U c)) & F a')
    assert f.atoms == {'a', 'b', 'c'}
    subs = list(f.subformulas())
    assert subs[-1] is f and len(subs) == len(set(subs))
    assert subs.index(parse('b U c')) < subs.index(parse('a -> b U c'))


@pytest.mark.parametrize('text', ['!' * 700 + 'a', '(' * 700 + 'a' + ')' * 700, 'X ' * 3000 + 'a',
                                  ' U '.join(['a'] * 2000)])
def test_deep_nesting_is_a_syntax_error_not_a_recursion_error(text):
    with pytest.raises(LtlfSyntaxError, match='nested more than 200 levels deep'):
        parse(text)


def test_reasonable_nesting_parses():
    assert str(parse('X ' * 150 + 'a')).count('X') == 150
