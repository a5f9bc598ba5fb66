"""Write docs/properties/<suite>.md from config/properties/<suite>.yaml (plus the
hand-written <suite>.notes.md beside it, when there is one).

Usage: python tools/gen_property_docs.py [--check]
With --check, exit 1 when a document is out of date (the test suite runs this).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from safemanip_ros.spec.suite import load_suite  # noqa: E402


def render(path: Path) -> str:
    suite = load_suite(path)
    lines = [f'# Property suite `{suite.name}`', '',
             f'Generated from `config/properties/{path.name}` by `tools/gen_property_docs.py`; do not edit by hand.',
             '', suite.description or '', '',
             f'Frames at {suite.rate_hz:g} Hz. Semantics: `docs/SEMANTICS.md` (§3 devices, §4 properties).', '']
    by_category: dict[str, list] = {}
    for p in suite.properties:
        by_category.setdefault(p.category, []).append(p)
    for category, props in by_category.items():
        lines += [f'## {category}', '']
        for p in props:
            lines += [f'### `{p.name}`', '', p.description, '']
            if p.over:
                binds = ', '.join(f'`{{{v}}}` = every scene entity matching `{dict(sel)}`' for v, sel in p.over.items())
                lines += [f'- bound per entity: {binds}']
            lines += [f'- formula: `{p.formula}`', f'- trigger (counted on its rising edge): `{p.trigger}`',
                      f'- recovery: `{p.recovery}`',
                      f'- end policy: {p.end_policy}; response: {p.response}; severity: {p.severity}', '']
    if suite.derived:
        lines += ['## Derived predicates', '', '| name | definition |', '|---|---|']
        lines += [f'| `{name}` | `{text}` |' for name, (text, _) in suite.derived.items()]
        lines.append('')
    lines += ['## Grounded predicates', '', '| name | unknown counts as | meaning |', '|---|---|---|']
    lines += [f'| `{d.name}` | {str(d.unknown_as).lower()} | {d.description} |' for d in suite.predicates.values()]
    notes = path.with_suffix('.notes.md')
    if notes.exists():   # hand-written notes (fidelity, deliberate differences) kept beside the suite
        lines += ['', f'<!-- from config/properties/{notes.name} -->', '', notes.read_text().rstrip('\n')]
    return '\n'.join(lines) + '\n'


def main(argv: list[str]) -> int:
    stale = []
    for path in sorted((REPO / 'config' / 'properties').glob('*.yaml')):
        out = REPO / 'docs' / 'properties' / f'{path.stem}.md'
        text = render(path)
        if '--check' in argv:
            if not out.exists() or out.read_text() != text:
                stale.append(str(out.relative_to(REPO)))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
    if stale:
        print(f'out of date: {", ".join(stale)}; run python tools/gen_property_docs.py')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
