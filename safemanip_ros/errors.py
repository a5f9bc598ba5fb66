"""The one error hierarchy of safemanip_ros.

Every error a user can cause derives from :class:`SafemanipError`; its message
names the thing that was wrong (file, position, field) and what was expected,
so command-line tools can print ``str(err)`` on one line and exit with code 2.
"""

from __future__ import annotations


class SafemanipError(Exception):
    """Base class of every error safemanip_ros raises on bad input."""

    def one_line(self) -> str:
        """The message on a single line, as the command-line tools print it."""
        return ' '.join(str(self).split('\n')[0:1]) or type(self).__name__


class LtlfSyntaxError(SafemanipError):
    """A formula that does not parse.

    ``position`` is the 0-based character offset of the offending token in
    ``text``; ``str()`` shows the formula with a caret under that position.
    """

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message = message
        self.text = text
        self.position = position
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return (
            f'{self.message} at position {self.position}\n'
            f'  {self.text}\n'
            f'  {" " * self.position}^'
        )


class TraceError(SafemanipError):
    """A trace file or step that cannot be read (names the file and line)."""


class EnvironmentSetupError(SafemanipError):
    """A missing system prerequisite (compiler, cmake, network, ROS 2 wheels)."""


class SpecError(SafemanipError):
    """An invalid property file, ontology or scene: names file, line and field."""


class MonitorInputError(SafemanipError):
    """A frame the monitor cannot use (unknown predicate, malformed frame)."""


class ParameterError(SafemanipError):
    """A node parameter out of its range (names the node, the parameter, the value and the range)."""


class FoxgloveError(SafemanipError):
    """The Foxglove server cannot start or serve as configured (its address,
    the operator credential, the SDK missing): names what and why."""


class StateBudgetError(SafemanipError):
    """More automaton states than the budget allows (raised as soon as
    exploration passes it, before memory runs out)."""

    def __init__(self, reached: int, steps: int, budget: int, projected: float | None = None) -> None:
        self.reached, self.steps, self.budget, self.projected = reached, steps, budget, projected
        found = (f'{reached:,} reached after {steps:,} steps of exploration' if projected is None else
                 f'{reached:,} reached after {steps:,} steps, growing to about {projected:.1e} by the end of its '
                 f'longest delay')
        super().__init__(f'the automaton needs more than {budget:,} states ({found}): a window needs a state per frame of its length, and one that '
                         f'starts after frame 0 (F[l,h], G[l,h] with l > 0) one per combination of triggers in its '
                         f'delay; shorten it or raise --max-states')
