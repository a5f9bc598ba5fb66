"""Every module outside safemanip_ros/nodes (and the simulator bridge)
imports in a Python where rclpy and the ROS message packages do not exist."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import safemanip_ros

REPO = Path(__file__).resolve().parents[1]
ROS_ONLY = ('safemanip_ros.nodes', 'safemanip_ros.sim.bridge', 'safemanip_ros.msg')

BLOCKER = r'''
import importlib.abc, sys
BLOCKED = ("rclpy", "rosidl_runtime_py", "rosidl_parser", "builtin_interfaces", "std_msgs", "geometry_msgs",
           "sensor_msgs", "tf2_msgs", "tf2_ros", "trajectory_msgs", "diagnostic_msgs", "std_srvs",
           "lifecycle_msgs", "launch", "launch_ros", "rosbag2_py", "safemanip_ros.msg")
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
