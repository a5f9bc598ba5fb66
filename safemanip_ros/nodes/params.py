"""Node parameters as ROS users give them, checked before a node runs.

* :class:`RosParameters` (a mixin for our nodes, listed before ``Node``):
  an integer given for a float parameter (``-p rate_hz:=10``) is taken as
  that float, as ``ros2 param set`` users expect; rclpy alone refuses it
  with ``InvalidParameterTypeException`` at ``declare_parameter``.  Any other
  type mismatch (a number for a path, a list for a rate) is a
  :class:`~safemanip_ros.errors.ParameterError` naming the parameter, the value
  and the type expected.
* :func:`check_range`: a parameter's value within its range, or a
  :class:`~safemanip_ros.errors.ParameterError` naming the node, the parameter
  and the range — for the node's configure step to fail on (fail closed).
"""

from __future__ import annotations

import math
from typing import Any

from rclpy.exceptions import InvalidParameterTypeException
from rclpy.parameter import Parameter

from ..errors import ParameterError


class RosParameters:
    """Mixin for ``rclpy.node.Node`` and ``LifecycleNode`` (list it first)."""

    def declare_parameter(self, name: str, value: Any = None, descriptor: Any = None,
                          ignore_override: bool = False) -> Any:
        overrides = getattr(self, '_parameter_overrides', None)
        if not isinstance(overrides, dict):
            overrides = {}
        given = overrides.get(name) if not ignore_override else None
        if given is not None:
            if isinstance(value, float) and given.type_ == Parameter.Type.INTEGER:
                overrides[name] = Parameter(name, Parameter.Type.DOUBLE, float(given.value))
            elif (isinstance(value, list) and value and all(isinstance(v, float) for v in value)
                  and given.type_ == Parameter.Type.INTEGER_ARRAY):
                overrides[name] = Parameter(name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in given.value])
        try:
            return super().declare_parameter(name, value, descriptor, ignore_override)  # type: ignore[misc]
        except InvalidParameterTypeException:
            # A value of another type (config:=-5.0, rate_hz:=abc, topics:=[1, 2]): a user error naming
            # the parameter, not rclpy's traceback.
            assert given is not None
            expected = Parameter.Type.from_parameter_value(value).name.lower().replace('_', ' ')
            raise ParameterError(f'{self.get_name()}: parameter {name} = {given.value!r} is of type '  # type: ignore[attr-defined]
                                 f'{given.type_.name.lower().replace("_", " ")}; expected {expected}') from None


MIN_RATE_HZ = 0.01
"""The slowest rate a rate parameter takes (a tick per 100 s); below it a
period overflows the timer (``rate_hz:=1e-300``)."""
MIN_PERIOD_S = 0.001
"""The shortest period a period parameter takes: a timer at 0 s spins the CPU."""


def check_range(node: Any, name: str, low: float, high: float = math.inf, *, low_open: bool = False) -> float:
    """The float parameter ``name`` of ``node``, finite and within
    ``[low, high]`` (``(low, high]`` with ``low_open``), else a ConfigError
    naming the node, the parameter, its value and the range."""
    value = float(node.get_parameter(name).value)
    ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f'{"(" if low_open else "["}{low:g}, {high:g}]'
        raise ParameterError(f'{node.get_name()}: parameter {name} = {value:g} is outside {bound}')
    return value
