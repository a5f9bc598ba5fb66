"""``safemanip check``: the verdict of a formula on each step of a trace."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable

from ..ltlf.cache import compile_cached
from ..ltlf.dfa import DFA
from ..ltlf.runtime import StepTable
from ..ltlf.trace import Step, read_batch, read_trace
from ..ltlf.verdict import Verdict


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        'check', help='verdicts of an LTLf formula along a trace',
        description='Run FORMULA over TRACE.jsonl (one step per line: {"atom": true, ...} with missing atoms '
                    'false, or a list of the true atoms; an atom of the formula that no step of a trace of '
                    'objects mentions is an error unless --absent-false) and print the four-valued verdict after each step. '
                    'With --batch, each line of the file is one whole trace (a JSON array of steps) and one '
                    'result is printed per line.')
    p.add_argument('formula', help="LTLf formula, e.g. 'G(grasped -> (synced U released))'")
    p.add_argument('trace', nargs='?', help='trace file, one step per line (JSONL)')
    p.add_argument('--batch', metavar='TRACES.jsonl', help='file of whole traces, one JSON array per line')
    p.add_argument('--json', action='store_true', help='print JSON (the default prints a readable table)')
    p.add_argument('--absent-false', action='store_true',
                   help='read an atom of the formula that no step of a trace of objects mentions as false (by '
                        'default it is an error: most often a misspelt name)')
    p.set_defaults(func=run)


def evaluate(dfa: DFA, table: StepTable, steps: list[Step]) -> dict[str, Any]:
    """The ``check`` result object for one trace."""
    letters = [dfa.letter(step) for step in steps]
    states = table.run(letters)
    labels = table.verdicts(states)
    return {
        'formula': dfa.formula,
        'verdicts': [Verdict(int(v)).text for v in labels],
        'accepted': bool(table.accepting[states[-1]]),
    }


def run(args: argparse.Namespace) -> int:
    if (args.trace is None) == (args.batch is None):
        from ..errors import TraceError
        raise TraceError('give exactly one of TRACE.jsonl or --batch TRACES.jsonl')
    dfa = compile_cached(args.formula)
    table = StepTable.from_dfa(dfa)
    reads = () if args.absent_false else dfa.atoms
    results: Iterable[dict[str, Any]] = [evaluate(dfa, table, read_trace(args.trace, reads))] \
        if args.batch is None else (evaluate(dfa, table, steps) for steps in read_batch(args.batch, reads))
    for result in results:
        if args.json:
            print(json.dumps(result))
        else:
            print(f"formula: {result['formula']}")
            for t, v in enumerate(result['verdicts']):
                print(f'  step {t:>5}: {v}')
            print(f"accepted: {str(result['accepted']).lower()}")
        sys.stdout.flush()
    return 0
