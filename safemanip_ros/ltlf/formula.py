"""Immutable, hash-consed LTLf formula objects.

Two structurally equal formulas are the *same object* (``a is b``), so formulas
can be used as dictionary keys and compared in O(1); the compiler relies on
this to share work between identical sub-formulas.  Formulas are built by the
parser or by the constructor functions below, never by calling ``Formula``
directly.

The canonical text of a formula (``str(f)``) uses the syntax of
SEMANTICS.md §2 with the fewest parentheses the precedence rules allow, and
``parse(str(f)) is f`` holds for every formula.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator

# Operator codes.  Kept as short strings so the canonical printer, JSON export
# and error messages can show them directly.
TRUE = 'true'
FALSE = 'false'
LAST = 'last'
ATOM = 'atom'
NOT = '!'
NEXT = 'X'
WEAK_NEXT = 'WX'
EVENTUALLY = 'F'
ALWAYS = 'G'
BOUNDED_EVENTUALLY = 'F[]'
BOUNDED_ALWAYS = 'G[]'
UNTIL = 'U'
WEAK_UNTIL = 'W'
RELEASE = 'R'
AND = '&'
OR = '|'
IMPLIES = '->'
IFF = '<->'

UNARY_OPS = frozenset({NOT, NEXT, WEAK_NEXT, EVENTUALLY, ALWAYS, BOUNDED_EVENTUALLY, BOUNDED_ALWAYS})
BINARY_OPS = frozenset({UNTIL, WEAK_UNTIL, RELEASE, AND, OR, IMPLIES, IFF})
TEMPORAL_OPS = frozenset(
    {NEXT, WEAK_NEXT, EVENTUALLY, ALWAYS, BOUNDED_EVENTUALLY, BOUNDED_ALWAYS, UNTIL, WEAK_UNTIL, RELEASE, LAST}
)

# Binding strength, larger binds tighter (SEMANTICS.md §2).
PRECEDENCE = {IFF: 1, IMPLIES: 2, OR: 3, AND: 4, UNTIL: 5, WEAK_UNTIL: 5, RELEASE: 6}
RIGHT_ASSOCIATIVE = frozenset({UNTIL, WEAK_UNTIL, RELEASE, IMPLIES})
UNARY_PRECEDENCE = 7


class Formula:
    """One node of an LTLf formula.

    Attributes:
        op: operator code (one of the module constants).
        args: operand formulas (0, 1 or 2).
        name: the atom name for ``ATOM`` nodes, else ``''``.
        bounds: ``(a, b)`` in frames for bounded ``F[a,b]`` / ``G[a,b]``.
    """

    __slots__ = ('op', 'args', 'name', 'bounds', '_hash', '_text', '_atoms', '__weakref__')

    op: str
    args: tuple['Formula', ...]
    name: str
    bounds: tuple[int, int] | None
    _hash: int
    _text: str | None
    _atoms: frozenset[str] | None

    def __setattr__(self, key: str, value: object) -> None:  # immutability
        raise AttributeError('Formula objects are immutable')

    def __reduce__(self) -> tuple[Any, ...]:  # pickling rebuilds through the hash-consing table
        return (_rebuild, (self.op, self.args, self.name, self.bounds))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def __lt__(self, other: 'Formula') -> bool:
        return str(self) < str(other)

    def __repr__(self) -> str:
        return f'Formula({str(self)!r})'

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = _to_text(self)
            object.__setattr__(self, '_text', text)
        return text

    @property
    def atoms(self) -> frozenset[str]:
        """Names of the atomic propositions the formula mentions."""
        atoms = self._atoms
        if atoms is None:
            if self.op == ATOM:
                atoms = frozenset((self.name,))
            else:
                atoms = frozenset().union(*(a.atoms for a in self.args)) if self.args else frozenset()
            object.__setattr__(self, '_atoms', atoms)
        return atoms

    def subformulas(self) -> Iterator['Formula']:
        """Every distinct sub-formula, children before parents."""
        seen: set[int] = set()
        stack: list[tuple[Formula, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in seen:
                continue
            if expanded:
                seen.add(id(node))
                yield node
            else:
                stack.append((node, True))
                stack.extend((a, False) for a in reversed(node.args))

    def __and__(self, other: 'Formula') -> 'Formula':
        return And(self, other)

    def __or__(self, other: 'Formula') -> 'Formula':
        return Or(self, other)

    def __invert__(self) -> 'Formula':
        return Not(self)


_TABLE: dict[tuple[Any, ...], Formula] = {}
_LOCK = threading.Lock()


def _make(op: str, args: tuple[Formula, ...] = (), name: str = '', bounds: tuple[int, int] | None = None) -> Formula:
    key = (op, tuple(id(a) for a in args), name, bounds)
    node = _TABLE.get(key)
    if node is not None:
        return node
    with _LOCK:
        node = _TABLE.get(key)
        if node is None:
            node = object.__new__(Formula)
            for attr, value in (('op', op), ('args', args), ('name', name), ('bounds', bounds),
                                ('_hash', hash(key)), ('_text', None), ('_atoms', None)):
                object.__setattr__(node, attr, value)
            # The table keeps every formula alive, so ids in keys stay unique.
            _TABLE[key] = node
    return node


def _rebuild(op: str, args: tuple[Formula, ...], name: str, bounds: tuple[int, int] | None) -> Formula:
    return _make(op, args, name, bounds)


def Atom(name: str) -> Formula:
    """An atomic proposition; ``name`` must match ``[a-z][a-z0-9_]*``."""
    from .parser import check_atom_name

    check_atom_name(name)
    return _make(ATOM, name=name)


def Not(f: Formula) -> Formula:
    return _make(NOT, (f,))


def And(f: Formula, g: Formula) -> Formula:
    return _make(AND, (f, g))


def Or(f: Formula, g: Formula) -> Formula:
    return _make(OR, (f, g))


def Implies(f: Formula, g: Formula) -> Formula:
    return _make(IMPLIES, (f, g))


def Iff(f: Formula, g: Formula) -> Formula:
    return _make(IFF, (f, g))


def Next(f: Formula) -> Formula:
    """Strong next: there is a next position and ``f`` holds there."""
    return _make(NEXT, (f,))


def WeakNext(f: Formula) -> Formula:
    """Weak next: this is the last position, or ``f`` holds at the next."""
    return _make(WEAK_NEXT, (f,))


def Eventually(f: Formula, bounds: tuple[int, int] | None = None) -> Formula:
    """``F f``, or ``F[a,b] f`` when ``bounds`` (frames, 0 ≤ a ≤ b) is given."""
    if bounds is None:
        return _make(EVENTUALLY, (f,))
    return _make(BOUNDED_EVENTUALLY, (f,), bounds=_check_bounds(bounds))


def Always(f: Formula, bounds: tuple[int, int] | None = None) -> Formula:
    """``G f``, or ``G[a,b] f`` when ``bounds`` (frames, 0 ≤ a ≤ b) is given."""
    if bounds is None:
        return _make(ALWAYS, (f,))
    return _make(BOUNDED_ALWAYS, (f,), bounds=_check_bounds(bounds))


def Until(f: Formula, g: Formula) -> Formula:
    return _make(UNTIL, (f, g))


def WeakUntil(f: Formula, g: Formula) -> Formula:
    return _make(WEAK_UNTIL, (f, g))


def Release(f: Formula, g: Formula) -> Formula:
    return _make(RELEASE, (f, g))


def _check_bounds(bounds: tuple[int, int]) -> tuple[int, int]:
    a, b = int(bounds[0]), int(bounds[1])
    if not 0 <= a <= b:
        raise ValueError(f'bounds must satisfy 0 <= a <= b, got [{a},{b}]')
    return (a, b)


TT = _make(TRUE)
FF = _make(FALSE)
LAST_F = _make(LAST)


def _needs_parens_left(parent: str, child: Formula) -> bool:
    if child.op not in PRECEDENCE:
        return False
    pc, pp = PRECEDENCE[child.op], PRECEDENCE[parent]
    if pc != pp:
        return pc < pp
    # Same level: a left operand needs parentheses under a right-associative
    # operator, and always for <-> (chains are rejected by the parser).
    return parent in RIGHT_ASSOCIATIVE or parent == IFF or child.op != parent


def _needs_parens_right(parent: str, child: Formula) -> bool:
    if child.op not in PRECEDENCE:
        return False
    pc, pp = PRECEDENCE[child.op], PRECEDENCE[parent]
    if pc != pp:
        return pc < pp
    return parent not in RIGHT_ASSOCIATIVE or child.op != parent


def _to_text(f: Formula) -> str:
    op = f.op
    if op == ATOM:
        return f.name
    if op in (TRUE, FALSE, LAST):
        return op
    if op in UNARY_OPS:
        child = f.args[0]
        inner = str(child)
        if child.op in PRECEDENCE:
            inner = f'({inner})'
        if op == NOT:
            return f'!{inner}'
        if op in (BOUNDED_EVENTUALLY, BOUNDED_ALWAYS):
            assert f.bounds is not None
            return f'{op[0]}[{f.bounds[0]},{f.bounds[1]}] {inner}'
        return f'{op} {inner}'
    left, right = f.args
    lt, rt = str(left), str(right)
    if _needs_parens_left(op, left):
        lt = f'({lt})'
    if _needs_parens_right(op, right):
        rt = f'({rt})'
    return f'{lt} {op} {rt}'
