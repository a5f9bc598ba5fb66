"""Write docs/properties/<suite>.md from config/properties/<suite>.yaml (plus the
hand-written <suite>.notes.md beside it, when there is one, and the table of
config/properties/differences/<suite>.yaml: the cases test_safemanip_compat runs
with both profiles).

Usage: python tools/gen_property_docs.py [--check]
With --check, exit 1 when a document is out of date (the test suite runs this).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from safemanip_ros.spec.suite import load_suite  # noqa: E402


def render(path: Path) -> str:
    suite = load_suite(path)
    lines = [f'# Property suite `{suite.name}`', '',
             f'Generated from `config/properties/{path.name}` by `tools/gen_property_docs.py`; do not edit by hand.',
             '', suite.description or '', '',
             f'Frames at {suite.rate_hz:g} Hz. Semantics: `docs/SEMANTICS.md` (§3 devices, §4 properties).', '']
    rules = suite.properties[0].rules if suite.properties else None
    if rules is not None and (rules.recovery_next_frame or not rules.count_failed_restart_at_end or rules.paper_metric):
        lines += ['Episode rules (`episode_rules`, instead of §4\'s):', '']
        if rules.recovery_next_frame:
            lines.append('- the recovery automaton reads the violation frame but is first judged on the next frame, '
                         'so an episode lasts at least two frames;')
        if not rules.count_failed_restart_at_end:
            lines.append('- a main automaton restarted on the last frame that already fails is not counted;')
        if rules.paper_metric:
            lines.append('- each instance also gets SafeManip\'s primary verdict (`paper`): the formula over the whole '
                         'trace without restarts, an obligation still open at the end counted as violated.')
        lines.append('')
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
                      f'- end policy: {p.end_policy}; response: {p.response}; severity: {p.severity}']
            if p.rules.drop_open_shorter_than_frames:
                lines.append(f'- an episode still open at the end that lasted fewer than '
                             f'{p.rules.drop_open_shorter_than_frames} frames is dropped')
            if p.rules.paper_timeout:
                lines.append(f'- primary verdict: satisfied at the end unless `{p.rules.paper_timeout}` became true')
            lines.append('')
    if suite.derived:
        lines += ['## Derived predicates', '', '| name | definition |', '|---|---|']
        lines += [f'| `{name}` | `{text}` |' for name, (text, _) in suite.derived.items()]
        lines.append('')
    lines += ['## Grounded predicates', '', '| name | unknown counts as | meaning |', '|---|---|---|']
    lines += [f'| `{d.name}` | {str(d.unknown_as).lower()} | {d.description} |' for d in suite.predicates.values()]
    notes = path.with_suffix('.notes.md')
    if notes.exists():   # hand-written notes (fidelity) kept beside the suite
        lines += ['', f'<!-- from config/properties/{notes.name} -->', '', notes.read_text().rstrip('\n')]
    differences = path.parent / 'differences' / path.name
    if differences.exists():
        lines += ['', f'<!-- from config/properties/differences/{path.name} -->', ''] + differences_table(differences)
    return '\n'.join(lines) + '\n'


def _spans(spans: list[list[int]]) -> str:
    return ' and '.join(f'{a}' if a == b else f'{a}–{b}' for a, b in spans)


def _result(r: dict) -> str:
    eps = ' '.join(f'[{s},{e}]' + ('' if rec else ' open') for s, e, rec in r['episodes'])
    out = f"N{r['triggers']} V{r['violations']}" + (f' {eps}' if eps else '')
    if r.get('pending'):
        out += ', pending'
    if 'paper' in r:
        out += f"; paper: {'violated' if r['paper'] else 'satisfied'}"
    return out


def differences_table(path: Path) -> list[str]:
    """The differences between the default suite and SafeManip's released
    monitor, one row per case of ``path`` (each asserted, for both
    profiles, by test/test_safemanip_compat.py)."""
    doc = yaml.safe_load(path.read_text())
    lines = ['## Differences from SafeManip\'s released monitor', '',
             'Run side by side on the same predicates, the default suite and SafeManip\'s released monitor differ in '
             'the classes below. `--profile safemanip-compat` (suite `safemanip_compat.yaml`, '
             '[its page](safemanip_compat.md)) reproduces SafeManip\'s behaviour; the default keeps ours, for the '
             'reason given. Each row is a test of both profiles (`test/test_safemanip_compat.py`); frames are '
             '0-based, spans inclusive, every other predicate false; N triggers, V violation episodes '
             '`[start,end]`, *paper* SafeManip\'s primary verdict (the compat profile reports it beside the '
             'episodes).', '',
             '| class | SafeManip\'s rule | minimal trace | property | default (ours) | safemanip-compat '
             '(= SafeManip) | why the default differs |', '|---|---|---|---|---|---|---|']
    for c in doc['cases']:
        trace = f"L={c['frames']}: " + ', '.join(f'`{n}` {_spans(sp)}' for n, sp in c['signals'].items())
        prop = f"`{c['property']}`" + (f" ({c['entity']})" if c.get('entity') else '')
        lines.append(f"| {c['id']} | {c['rule']} | {trace} | {prop} | {_result(c['default'])} | "
                     f"{_result(c['compat'])} | {c['choice']} |")
    return lines


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
