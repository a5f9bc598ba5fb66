"""LTLf: formulas, a parser, a symbolic compiler to minimal DFAs, and
vectorised runtimes for stepping them (SEMANTICS.md §2)."""

from .compiler import compile_formula
from .dfa import DFA
from .formula import Formula
from .parser import parse
from .verdict import Verdict

__all__ = ['DFA', 'Formula', 'Verdict', 'compile_formula', 'parse']
