"""Every module outside safemanip_ros/nodes (and the simulator bridge)
imports in a Python where rclpy and the ROS message packages do not exist."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import safemanip_ros

ROS_ONLY = ('safemanip_ros.nodes', 'safemanip_ros.sim.bridge', 'safemanip_ros.msg', 'safemanip_ros.srv')

BLOCKER = r'''
import importlib.abc, sys
BLOCKED = ("rclpy", "rosidl_runtime_py", "rosidl_parser", "builtin_interfaces", "std_msgs", "geometry_msgs",
           "sensor_msgs", "tf2_msgs", "tf2_ros", "trajectory_msgs", "diagnostic_msgs", "std_srvs",
           "lifecycle_msgs", "launch", "launch_ros", "rosbag2_py", "safemanip_ros.msg", "safemanip_ros.srv")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked ROS module {name} (this Python has no ROS)")
        return None
sys.meta_path.insert(0, Block())
import importlib
failures = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as err:
        failures.append(f"{name}: {type(err).__name__}: {err}")
print("\n".join(failures))
sys.exit(1 if failures else 0)
'''


def core_modules() -> list[str]:
    names = ['safemanip_ros']
    for info in pkgutil.walk_packages(safemanip_ros.__path__[:1], 'safemanip_ros.'):
        if not info.name.startswith(ROS_ONLY):
            names.append(info.name)
    return names


@pytest.mark.slow
def test_core_modules_import_without_ros():
    modules = core_modules()
    assert 'safemanip_ros.ltlf.compiler' in modules and 'safemanip_ros.cli.main' in modules
    proc = subprocess.run([sys.executable, '-c', BLOCKER, *modules], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_blocker_really_blocks():
    proc = subprocess.run([sys.executable, '-c', BLOCKER, 'safemanip_ros.nodes.conversions'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and 'blocked ROS module' in proc.stdout


def test_the_audit_engine_imports_without_scipy():
    """Importing ``scipy.stats`` took 1.3 s of every process that imported the
    audit (each Ray worker, each ``safemanip audit``) for one beta quantile;
    the report imports ``scipy.special`` when it computes an interval."""
    probe = 'import sys, safemanip_ros.audit.engine; print(sorted(m for m in sys.modules if m.startswith("scipy")))'
    proc = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '[]'


# Which layers (folders of safemanip_ros) each layer may import, lazily or not;
# the top-level modules (errors, resources, atomic_file, ...) are open to all.
LAYERS_BELOW = {
    'ltlf': set(),
    'spec': {'ltlf'},
    'monitor': {'ltlf', 'spec'},
    'bag': set(),
    'grounding': {'bag', 'spec'},
    'supervisor': {'spec'},                      # spec: the field schemas of policy and alert files
    'audit': {'bag', 'grounding', 'ltlf', 'monitor', 'spec'},
    'sim': {'audit', 'bag', 'grounding', 'spec'},
    'specrl': {'audit', 'ltlf', 'spec'},          # audit: bags read on its frame clock
    'gym': {'ltlf', 'monitor', 'sim', 'spec', 'specrl'},
    # foxglove: what Foxglove is shown, from a robot's configuration, TF decoded by the bag layouts and
    # the monitor's verdict board;
    # nodes: audit for the live gate.
    # foxglove: audit for an audited rollout's MCAP (the audit's own frames and verdicts).
    'foxglove': {'audit', 'bag', 'grounding', 'monitor', 'spec'},   # monitor: the verdict board; spec: instances
    'nodes': {'audit', 'bag', 'foxglove', 'grounding', 'ltlf', 'monitor', 'sim', 'spec', 'supervisor', 'msg'},
    'cli': {'audit', 'bag', 'foxglove', 'grounding', 'gym', 'ltlf', 'monitor', 'nodes', 'sim', 'spec', 'specrl',
            'supervisor', 'msg'},
}
# The one exception, by module: building a monitor from files drops the
# properties a robot configuration cannot ground, so it asks the grounding
# catalogue what that configuration grounds.
ALSO_ALLOWED = {'safemanip_ros.monitor.build': {'grounding'}}


def _layer_imports(path: Path, root: Path = REPO) -> list[tuple[str, int]]:
    """``(imported layer, line)`` for every import of a safemanip_ros layer in ``path`` (under ``root``)."""
    import ast
    package = path.relative_to(root).parts[:-1]           # ('safemanip_ros', layer, ...)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - (node.level - 1)])
                target = base + (node.module.split('.') if node.module else [node.names[0].name])
            elif node.module and node.module.split('.')[0] == 'safemanip_ros':
                target = node.module.split('.')
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [a.name.split('.') for a in node.names if a.name.split('.')[0] == 'safemanip_ros']
            if not names:
                continue
            target = names[0]
        else:
            continue
        if len(target) > 1 and target[1] in LAYERS_BELOW:
            out.append((target[1], node.lineno))
    return out


def _wrong_imports(root: Path) -> list[str]:
    package = root / 'safemanip_ros'
    wrong = []
    for path in sorted(package.rglob('*.py')):
        parts = path.relative_to(package).parts
        if len(parts) < 2:
            continue
        layer = parts[0]
        module = 'safemanip_ros.' + '.'.join(parts)[:-3]
        allowed = LAYERS_BELOW[layer] | {layer} | ALSO_ALLOWED.get(module, set())
        wrong += [f'{path.relative_to(root)}:{line}: {layer} imports {target}'
                  for target, line in _layer_imports(path, root) if target not in allowed]
    return wrong


@pytest.mark.slow
def test_layers_import_only_the_layers_below_them():
    package = REPO / 'safemanip_ros'
    assert {p.name for p in package.iterdir() if (p / '__init__.py').is_file()} == set(LAYERS_BELOW)
    wrong = _wrong_imports(REPO)
    assert not wrong, '\n'.join(wrong)


def test_the_layer_rule_sees_lazy_imports(tmp_path):
    """The check reads imports inside functions too (most cross-layer ones
    are lazy), relative and absolute, and the one exception is by module."""
    bag = tmp_path / 'safemanip_ros' / 'bag'
    bag.mkdir(parents=True)
    (bag / 'probe.py').write_text('import numpy\nfrom .errors import BagError\n\n\ndef f():\n'
                                  '    from ..audit import engine\n    import safemanip_ros.monitor.core\n')
    monitor = tmp_path / 'safemanip_ros' / 'monitor'
    monitor.mkdir()
    (monitor / 'build.py').write_text('from ..grounding.catalog import grounded_predicates\n')
    (monitor / 'core.py').write_text('from ..grounding.catalog import grounded_predicates\n')
    assert _wrong_imports(tmp_path) == ['safemanip_ros/bag/probe.py:6: bag imports audit',
                                        'safemanip_ros/bag/probe.py:7: bag imports monitor',
                                        'safemanip_ros/monitor/core.py:1: monitor imports grounding']


@pytest.mark.slow
def test_property_instances_are_built_only_in_monitor_build():
    """``spec.suite.instantiate`` (suite + scene → instances) is called by
    ``monitor/build.py`` alone: every monitor, live, offline or in a
    Gymnasium wrapper, gets its instances the same way."""
    import ast
    users = []
    for path in sorted((REPO / 'safemanip_ros').rglob('*.py')):
        rel = path.relative_to(REPO / 'safemanip_ros')
        if rel.parts[0] == 'spec' or rel == Path('monitor/build.py'):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or '').endswith('suite') and \
                    any(a.name == 'instantiate' for a in node.names):
                users.append(f'{rel}:{node.lineno}')
    assert users == []


def _rosbags_importers(root: Path) -> list[str]:
    """``file:line`` of every import of rosbags under ``root/safemanip_ros`` outside its bag package."""
    import ast
    out = []
    for path in sorted((root / 'safemanip_ros').rglob('*.py')):
        rel = path.relative_to(root / 'safemanip_ros')
        if rel.parts[0] == 'bag':
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ''] if isinstance(node, ast.ImportFrom) and not node.level else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == 'rosbags' or n.startswith('rosbags.') for n in names):
                out.append(f'{rel}:{node.lineno}')
    return out


@pytest.mark.slow
def test_only_the_bag_package_imports_rosbags(tmp_path):
    """rosbags is read, and its errors wrapped into the bag package's
    (naming the bag), in safemanip_ros/bag alone; the check sees lazy imports."""
    assert _rosbags_importers(REPO) == []
    probe = tmp_path / 'safemanip_ros' / 'audit'
    probe.mkdir(parents=True)
    (probe / 'x.py').write_text('def f():\n    from rosbags.rosbag2 import ReaderError\n    import rosbags.serde\n')
    assert _rosbags_importers(tmp_path) == ['audit/x.py:2', 'audit/x.py:3']


def test_every_subpackage_says_what_it_offers():
    """Each package of safemanip_ros has ``__all__``, and every name in it is
    a module of the package or a name it defines."""
    import importlib
    package = REPO / 'safemanip_ros'
    for folder in sorted(p for p in package.iterdir() if (p / '__init__.py').is_file()):
        module = importlib.import_module(f'safemanip_ros.{folder.name}')
        assert hasattr(module, '__all__'), folder.name
        for name in module.__all__:
            assert (folder / f'{name}.py').is_file() or (folder / name / '__init__.py').is_file() or \
                name in vars(module), f'{folder.name}: {name}'
