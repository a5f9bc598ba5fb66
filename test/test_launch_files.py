"""Launch files name only executables, parameter files and parameters that exist.

Checked statically from the launch file's syntax tree (launch_ros is not on
PyPI); where launch_ros is importable the launch descriptions are also built
for real.  The checker is itself tested on broken launch files.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

LAUNCH_FILES = sorted((REPO / 'launch').glob('*.launch.py'))


def executables() -> dict[str, str]:
    """Executable name → module, from resource/executables.txt."""
    out = {}
    for line in (REPO / 'resource' / 'executables.txt').read_text().splitlines():
        m = re.match(r'^([a-z_]+) = ([\w.]+):(\w+)', line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def declared_parameters(module: str) -> set[str]:
    """The parameters a node module declares: one by one, and from the
    tables of safemanip_ros/settings.py it hands to ``declare_settings``."""
    from safemanip_ros import settings
    path = REPO / (module.replace('.', '/') + '.py')
    text = path.read_text()
    names = set(re.findall(r"declare_parameter\(\s*'([^']+)'", text))
    for table in re.findall(r"declare_settings\(self, ([A-Z_]+)[,)]", text):
        names |= {s.name for s in getattr(settings, table)}
    names |= {getattr(settings, c).name for c in re.findall(r"declare_parameter\(([A-Z_]+)\.name", text)}
    return names


def _const(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _param_file(node: ast.AST) -> Path | None:
    # os.path.join(get_package_share_directory('safemanip_ros'), 'config', ..., 'x.yaml')
    if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'join':
        parts = node.args
        if parts and isinstance(parts[0], ast.Call) and getattr(parts[0].func, 'id', '') == 'get_package_share_directory':
            return REPO.joinpath(*[str(_const(p)) for p in parts[1:]])
    return None


def check_launch_source(source: str, filename: str = '<launch>') -> list[str]:
    """Problems found in one launch file's text (empty list = fine)."""
    problems: list[str] = []
    exes = executables()
    tree = ast.parse(source, filename)
    # Resolve simple `name = os.path.join(...)` assignments used in parameters=[...].
    assigned: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and
                getattr(node.func, 'id', getattr(node.func, 'attr', '')) in ('Node', 'LifecycleNode')):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if _const(kw.get('package')) != 'safemanip_ros':
            continue
        exe = _const(kw.get('executable'))
        if exe not in exes:
            problems.append(f'{filename}:{node.lineno}: executable {exe!r} is not in resource/executables.txt '
                            f'(known: {sorted(exes)})')
            continue
        declared = declared_parameters(exes[exe])
        node_name = _const(kw.get('name')) or exe
        params = kw.get('parameters')
        for item in (params.elts if isinstance(params, ast.List) else []):
            item = assigned.get(item.id, item) if isinstance(item, ast.Name) else item
            if isinstance(item, ast.Dict):
                for key in item.keys:
                    name = _const(key)
                    if name not in declared:
                        problems.append(f'{filename}:{node.lineno}: parameter {name!r} is not declared by '
                                        f'{exe} (declared: {sorted(declared)})')
                continue
            path = _param_file(item)
            if path is None:
                problems.append(f'{filename}:{node.lineno}: cannot resolve a parameters entry statically')
            elif not path.is_file():
                problems.append(f'{filename}:{node.lineno}: parameter file {path.relative_to(REPO)} does not exist')
            else:
                data = yaml.safe_load(path.read_text()) or {}
                node_section = data.get(node_name, data.get('/**'))
                if not isinstance(node_section, dict) or 'ros__parameters' not in node_section:
                    problems.append(f'{filename}:{node.lineno}: {path.relative_to(REPO)} is not a ROS parameter '
                                    f'file for node {node_name!r} (needs {node_name}: ros__parameters: ...)')
                    continue
                section = node_section['ros__parameters']
                for name in section:
                    if name not in declared:
                        problems.append(f'{filename}:{node.lineno}: parameter {name!r} in '
                                        f'{path.relative_to(REPO)} is not declared by {exe} '
                                        f'(declared: {sorted(declared)})')
    return problems


def test_there_are_launch_files():
    assert LAUNCH_FILES


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_names_only_existing_things(path: Path):
    assert check_launch_source(path.read_text(), path.name) == []


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_loads_with_launch_ros_where_importable(path: Path):
    try:
        importlib.import_module('launch_ros')
    except ImportError:
        # Not on PyPI; the static check above is the check here.  Still make
        # sure the file is valid Python that defines the entry point.
        tree = ast.parse(path.read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == 'generate_launch_description' for n in tree.body)
        return
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.generate_launch_description().entities


BROKEN = '''
import os
from ament_index_python.packages import get_package_share_directory
from launch_ros.actions import Node
def generate_launch_description():
    params = os.path.join(get_package_share_directory('safemanip_ros'), 'config', 'params', '{file}')
    return [Node(package='safemanip_ros', executable='{exe}', parameters=[params, {{'{param}': 1}}])]
'''


def test_checker_reports_missing_executable():
    problems = check_launch_source(BROKEN.format(file='trace_player.yaml', exe='no_such_node', param='rate_hz'))
    assert len(problems) == 1 and "executable 'no_such_node'" in problems[0]


def test_checker_reports_missing_parameter_file():
    problems = check_launch_source(BROKEN.format(file='missing.yaml', exe='trace_player', param='rate_hz'))
    assert len(problems) == 1 and 'missing.yaml does not exist' in problems[0]


def test_checker_reports_undeclared_parameter():
    problems = check_launch_source(BROKEN.format(file='trace_player.yaml', exe='trace_player', param='rate_hzz'))
    assert len(problems) == 1 and "'rate_hzz' is not declared" in problems[0]


def test_checker_reports_non_parameter_file():
    problems = check_launch_source(BROKEN.format(file='../params/supervisor_policy.yaml', exe='trace_player',
                                                 param='rate_hz'))
    assert len(problems) == 1 and 'is not a ROS parameter file' in problems[0]


def test_every_node_parameter_is_declared_once_with_its_meaning():
    """Each node executable declares its parameters from the tables of
    safemanip_ros/settings.py (so `ros2 param describe` shows a meaning, and
    a range where one applies), none one by one; and every entry says what it is."""
    from safemanip_ros import settings
    modules = sorted(set(executables().values()))
    one_by_one = {m: re.findall(r"\bdeclare_parameter\(\s*'([^']+)'", (REPO / (m.replace('.', '/') + '.py')).read_text())
                  for m in modules}
    assert not {m: names for m, names in one_by_one.items() if names}, one_by_one
    tables = [v for v in vars(settings).values() if isinstance(v, tuple) and v and isinstance(v[0], settings.Setting)]
    assert len(tables) >= 10, len(tables)
    undescribed = [s.name for t in tables for s in t if len(s.description) < 12]
    assert not undescribed, undescribed
