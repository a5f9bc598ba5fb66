"""``safemanip compile``: an LTLf formula to its minimal DFA."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import SafemanipError
from ..ltlf.compiler import CONSTRUCTIONS, MAX_STATES, compile_reporting
from ..memory import keep_freed_memory


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        'compile', help='compile an LTLf formula to a minimal DFA',
        description='Compile FORMULA to its minimal complete DFA and print its size, accepting states, atoms '
                    'and compile time; optionally write Graphviz DOT and JSON.')
    p.add_argument('formula', help='LTLf formula')
    p.add_argument('--dot', metavar='FILE', help='write the automaton as Graphviz DOT')
    p.add_argument('--json', metavar='FILE', dest='json_file', help='write the automaton as JSON')
    p.add_argument('--max-states', type=int, default=MAX_STATES, metavar='N',
                   help='give up with an error once the automaton passes N states (default: %(default)s)')
    p.add_argument('--construction', choices=CONSTRUCTIONS, default='auto',
                   help='symbolic (BDD progression), explicit (breadth-first layers in numpy, at most 6 atoms) or '
                        'auto (explicit where window counters interact, else symbolic; default). The automaton is '
                        'the same either way')
    p.set_defaults(func=run)


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as err:
        raise SafemanipError(f'{path}: cannot write: {err.strerror or err}') from err


def run(args: argparse.Namespace) -> int:
    keep_freed_memory()     # this process only compiles: its array buffers are reused, not faulted in again
    try:
        if args.max_states < 1:
            raise SafemanipError(f'--max-states {args.max_states}: expected at least 1')
        dfa, construction = compile_reporting(args.formula, args.construction, args.max_states)
    except ValueError as err:
        raise SafemanipError(str(err)) from err
    accepting = [s for s in dfa.states if dfa.accepting[s]]
    print(f'formula: {dfa.formula}')
    print(f'atoms: {json.dumps(list(dfa.atoms))}')
    print(f'states: {dfa.num_states}')
    print(f'initial: {dfa.initial}')
    print(f'accepting states: {json.dumps(accepting)}')
    print(f'labels: {json.dumps([v.text for v in dfa.labels])}')
    print(f'decision nodes: {len(dfa.node_atom)}')
    print(f'construction: {construction}')
    print(f'compile time: {dfa.compile_time_s * 1000:.3f} ms')
    if args.dot:
        _write(args.dot, dfa.to_dot())
    if args.json_file:
        _write(args.json_file, dfa.to_json(indent=1))
    return 0
