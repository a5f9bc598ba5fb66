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
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.parameter import Parameter

from ..errors import ParameterError
from ..settings import Setting

__all__ = ['ROS_OWN_PARAMETERS', 'RosParameters', 'check_range', 'check_setting',
           'declare_settings', 'descriptor', 'unclaimed_parameters']


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
        except InvalidParameterValueException:
            # Outside the descriptor's range (rclpy checks it on declare): the range, in one line.
            assert given is not None and descriptor is not None
            raise ParameterError(f'{self.get_name()}: parameter {name} = {float(given.value):g} is outside '  # type: ignore[attr-defined]
                                 f'{descriptor.additional_constraints}') from None
        except InvalidParameterTypeException:
            # A value of another type (config:=-5.0, rate_hz:=abc, topics:=[1, 2]): a user error naming
            # the parameter, not rclpy's traceback.
            assert given is not None
            raise ParameterError(f'{self.get_name()}: parameter {name} = {given.value!r} is of type '  # type: ignore[attr-defined]
                                 f'{given.type_.name.lower().replace("_", " ")}; expected {_type_name(value)}') from None


def _type_name(value: Any) -> str:
    """The ROS parameter type of ``value``, as users read it (``double``, ``string array``)."""
    return Parameter.Type.from_parameter_value(value).name.lower().replace('_', ' ')


def descriptor(setting: Setting) -> ParameterDescriptor:
    """``setting``'s meaning and range as ROS shows them (``ros2 param describe``)."""
    d = ParameterDescriptor(description=setting.description)
    if setting.low is None or setting.high is None:
        return d
    if isinstance(setting.default, int):
        d.integer_range = [IntegerRange(from_value=int(setting.low), to_value=int(setting.high), step=1)]
    else:
        d.floating_point_range = [FloatingPointRange(from_value=float(setting.low), to_value=float(setting.high),
                                                     step=0.0)]
    d.additional_constraints = setting.bounds
    return d


def declare_settings(node: Any, settings: Sequence[Setting], defaults: Mapping[str, Any] | None = None) -> None:
    """Declare a parameter of ``node`` for each of ``settings``, with its
    descriptor; ``defaults``: this node's own default of a setting (by name)."""
    for s in settings:
        node.declare_parameter(s.name, (defaults or {}).get(s.name, s.default), descriptor(s))


def check_setting(node: Any, setting: Setting) -> Any:
    """The value of ``node``'s parameter for ``setting``, within its range,
    else a ParameterError naming the node, the parameter, its value and the range."""
    value = node.get_parameter(setting.name).value
    problem = setting.problem(value)
    if problem:
        raise ParameterError(f'{node.get_name()}: parameter {setting.name} = {value:g} {problem}')
    return value


def check_range(node: Any, name: str, low: float, high: float = math.inf, *, low_open: bool = False) -> float:
    """The float parameter ``name`` of ``node``, finite and within
    ``[low, high]`` (``(low, high]`` with ``low_open``), else a ParameterError
    naming the node, the parameter, its value and the range (the check of
    :meth:`Setting.problem`, for a parameter no table declares)."""
    return float(check_setting(node, Setting(name, 0.0, '', low, None if math.isinf(high) else high, low_open)))


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
