"""Parser for the LTLf syntax of SEMANTICS.md §2 (ltlf2dfa-compatible).

Precedence, tightest first: unary (``! X WX F G F[a,b] G[a,b]``), ``R``,
``U``/``W``, ``&``, ``|``, ``->``, ``<->``.  ``U``, ``W``, ``R`` and ``->``
associate to the right, ``&`` and ``|`` to the left; a chain of ``<->``
without parentheses is rejected because ltlf2dfa gives it a non-standard
meaning.  Errors are :class:`~safemanip_ros.errors.LtlfSyntaxError` naming the
0-based character position and what was expected there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import LtlfSyntaxError
from . import formula as fm
from .formula import Formula

ATOM_RE = re.compile(r'[a-z][a-z0-9_]*\Z')
_KEYWORDS = {'true': fm.TT, 'false': fm.FF, 'last': fm.LAST_F}
_UPPER_OPS = {'X', 'WX', 'F', 'G', 'U', 'W', 'R'}
_BINARY_TOKENS = {'U': fm.UNTIL, 'W': fm.WEAK_UNTIL, 'R': fm.RELEASE, '&': fm.AND,
                  '|': fm.OR, '->': fm.IMPLIES, '<->': fm.IFF}
MAX_NESTING = 200
"""Deepest nesting of operators and parentheses accepted, in the text and in
the formula built from it (a chain of 300 ``&`` is 300 levels deep): deeper
gets a syntax error at the position, not a RecursionError from the parser or
from the compiler's and printer's recursions over the formula."""
_BINARY_BUILD = {fm.UNTIL: fm.Until, fm.WEAK_UNTIL: fm.WeakUntil, fm.RELEASE: fm.Release,
                 fm.AND: fm.And, fm.OR: fm.Or, fm.IMPLIES: fm.Implies, fm.IFF: fm.Iff}


def check_atom_name(name: str) -> None:
    if not isinstance(name, str) or not ATOM_RE.match(name) or name in _KEYWORDS:
        raise ValueError(f'invalid atom name {name!r}: atoms match [a-z][a-z0-9_]* and are not true/false/last')


@dataclass(frozen=True)
class _Token:
    kind: str  # 'name', 'int', 'op', 'end'
    text: str
    pos: int


_TOKEN_RE = re.compile(
    r'(?P<ws>\s+)|(?P<name>[a-z][a-z0-9_]*)|(?P<upper>[A-Z][A-Za-z0-9_]*)|(?P<int>[0-9]+)'
    r'|(?P<op><->|->|[!&|()\[\],])'
)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise LtlfSyntaxError(f'unexpected character {text[pos]!r}', text, pos)
        kind = m.lastgroup
        value = m.group()
        if kind == 'upper':
            if value not in _UPPER_OPS:
                raise LtlfSyntaxError(
                    f'unknown operator {value!r} (operators are X WX F G U W R; atoms are lower-case)', text, pos)
            kind = 'op'
        if kind != 'ws':
            tokens.append(_Token(kind, value, pos))  # type: ignore[arg-type]
        pos = m.end()
    tokens.append(_Token('end', '', len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.tree_depth: dict[Formula, int] = {}     # built formulas deeper than 1 (atoms, constants: 1)

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise LtlfSyntaxError(f'formula nested more than {MAX_NESTING} levels deep', self.text, self.tok.pos)

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def error(self, expected: str, tok: _Token | None = None) -> LtlfSyntaxError:
        tok = tok or self.tok
        found = 'end of formula' if tok.kind == 'end' else repr(tok.text)
        return LtlfSyntaxError(f'expected {expected}, found {found}', self.text, tok.pos)

    def expect(self, text: str, what: str) -> _Token:
        tok = self.tok
        if tok.text != text or tok.kind == 'name':
            raise self.error(what)
        self.i += 1
        return tok

    def parse(self) -> Formula:
        if self.tok.kind == 'end':
            raise self.error('a formula')
        f = self.binary(1)
        if self.tok.kind != 'end':
            raise self.error('a binary operator (U W R & | -> <->) or end of formula')
        return f

    def binary(self, min_prec: int) -> Formula:
        self._deeper()
        try:
            return self._binary(min_prec)
        finally:
            self.depth -= 1

    def _binary(self, min_prec: int) -> Formula:
        left = self.unary()
        built_iff = False
        while True:
            tok = self.tok
            op = _BINARY_TOKENS.get(tok.text) if tok.kind == 'op' else None
            if op is None:
                return left
            prec = fm.PRECEDENCE[op]
            if prec < min_prec:
                return left
            if op == fm.IFF:
                # <-> is the loosest operator, so a second one in the same
                # loop means an unparenthesised chain.
                if built_iff:
                    raise LtlfSyntaxError(
                        'a chain of <-> needs parentheses (ltlf2dfa reads it non-standardly)', self.text, tok.pos)
                built_iff = True
            self.i += 1
            next_min = prec if op in fm.RIGHT_ASSOCIATIVE else prec + 1
            right = self.binary(next_min)
            left = self._built(_BINARY_BUILD[op](left, right), tok)

    def unary(self) -> Formula:
        self._deeper()
        try:
            return self._unary()
        finally:
            self.depth -= 1

    def _built(self, f: Formula, tok: _Token) -> Formula:
        """``f``, just built at ``tok``, if it is at most MAX_NESTING deep."""
        depth = 1 + max((self.tree_depth.get(a, 1) for a in f.args), default=0)
        if depth > MAX_NESTING:
            raise LtlfSyntaxError(f'formula nested more than {MAX_NESTING} levels deep (a chain of binary '
                                  f'operators counts a level for each)', self.text, tok.pos)
        if depth > 1:
            self.tree_depth[f] = depth
        return f

    def _unary(self) -> Formula:
        tok = self.tok
        if tok.kind == 'op':
            if tok.text == '!':
                self.i += 1
                return self._built(fm.Not(self.unary()), tok)
            if tok.text in ('X', 'WX'):
                self.i += 1
                return self._built((fm.Next if tok.text == 'X' else fm.WeakNext)(self.unary()), tok)
            if tok.text in ('F', 'G'):
                self.i += 1
                bounds = self.bounds() if self.tok.text == '[' else None
                build = fm.Eventually if tok.text == 'F' else fm.Always
                return self._built(build(self.unary(), bounds), tok)
            if tok.text == '(':
                self.i += 1
                inner = self.binary(1)
                self.expect(')', "')' or a binary operator")
                return inner
        if tok.kind == 'name':
            self.i += 1
            keyword = _KEYWORDS.get(tok.text)
            return keyword if keyword is not None else fm._make(fm.ATOM, name=tok.text)
        raise self.error("an atom, 'true', 'false', 'last', '(' or a unary operator (! X WX F G)")

    def bounds(self) -> tuple[int, int]:
        open_tok = self.expect('[', "'['")
        a_tok = self.tok
        if a_tok.kind != 'int':
            raise self.error('a non-negative integer lower bound (frames)')
        self.i += 1
        self.expect(',', "','")
        b_tok = self.tok
        if b_tok.kind != 'int':
            raise self.error('a non-negative integer upper bound (frames)')
        self.i += 1
        self.expect(']', "']'")
        a, b = int(a_tok.text), int(b_tok.text)
        if a > b:
            raise LtlfSyntaxError(f'bounds [{a},{b}] need a <= b', self.text, open_tok.pos)
        return (a, b)


def parse(text: str) -> Formula:
    """Parse LTLf text into a hash-consed :class:`Formula`.

    Raises:
        LtlfSyntaxError: naming the position and what was expected.
    """
    if not isinstance(text, str):
        raise TypeError(f'formula text must be str, got {type(text).__name__}')
    return _Parser(text).parse()
