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

import difflib
import math
from collections.abc import Collection, Sequence
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
        if given is not None and given.type_ == Parameter.Type.NOT_SET and value is not None:
            # `-p properties:=[]` (or `:=null`) reaches rclpy with no type: declared, it would leave the
            # parameter uninitialised and the node's configure would fail with rclpy's exception.
            # A list of strings takes it as [''] (our nodes drop empty strings: rclpy types an empty list
            # as bytes, not strings); anything else has no empty value to take.
            if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
                raise ParameterError(f'{self.get_name()}: parameter {name} is given no value (an empty list or '  # type: ignore[attr-defined]
                                     f'null); expected {_type_name(value)}')
            overrides[name] = Parameter(name, Parameter.Type.STRING_ARRAY, [''])
        elif given is not None:
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
            raise ParameterError(f'{self.get_name()}: parameter {name} = {given.value!r} is of type '  # type: ignore[attr-defined]
                                 f'{given.type_.name.lower().replace("_", " ")}; expected {_type_name(value)}') from None


def _type_name(value: Any) -> str:
    """The ROS parameter type of ``value``, as users read it (``double``, ``string array``)."""
    return Parameter.Type.from_parameter_value(value).name.lower().replace('_', ' ')


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


ROS_OWN_PARAMETERS = frozenset({'use_sim_time', 'start_type_description_service'})
"""Parameters rclpy itself declares on every node."""


def unclaimed_parameters(nodes: Sequence[Any], elsewhere: Collection[str] = ()) -> list[str]:
    """Parameters given to the nodes of one process (``-p``, a parameters
    file, a launch file's ``parameters``) that are not theirs: one line
    each.  rclpy drops them without a word, so a misspelt ``-p rate_hx:=10``
    would run the stack at its default rate.

    A name given to every node of the process (``-p name:=v``, a ``/**``
    section) must be taken by one of them, or by ``elsewhere`` (the
    parameters of nodes the same arguments start in another process); a
    name given to some nodes only (``-p node:name:=v``, a ``node:``
    section) must be taken by each of those."""
    given = {id(n): set(getattr(n, '_parameter_overrides', None) or ()) for n in nodes}
    taken = {id(n): set(getattr(n, '_parameters', None) or ()) for n in nodes}
    everywhere = set.intersection(*given.values()) if nodes else set()
    anywhere = set().union(*taken.values()) | set(elsewhere)
    problems: list[str] = []
    seen: set[str] = set()
    for node in nodes:
        for name in sorted(given[id(node)] - taken[id(node)]):
            if name in ROS_OWN_PARAMETERS or name.startswith('qos_overrides.'):
                continue
            if name in everywhere:
                if name in anywhere or name in seen:
                    continue
                seen.add(name)
                what = ('no node of this process has it' if len(nodes) > 1 else
                        f'node {node.get_name()} has no such parameter')
                pool = sorted(anywhere)
            else:
                what, pool = f'node {node.get_name()} has no such parameter', sorted(taken[id(node)])
            near = difflib.get_close_matches(name, pool, n=1)
            listed = ', '.join(p for p in pool if p not in ROS_OWN_PARAMETERS)
            problems.append(f'parameter {name!r}: {what} ' + (f'(did you mean {near[0]!r}?)' if near else
                                                               f'(the parameters: {listed})'))
    return problems
