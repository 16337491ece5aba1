"""Steps that need the outside world, written once and driven two ways.

A component operation that must call another component, write a file or wait (a sync task's
``SaveBinlogPaths``, the checkpoint updater's RPC) is a generator: it ``yield``s an *effect* (a small
frozen dataclass saying what it needs) and receives the result by ``send``; a failure comes back into
it as a raised exception (``throw``), at the line that asked. The same generator runs

* in unit tests and notebooks through :func:`drive` with a plain handler function, synchronously;
* in the simulator as a SimPy process that performs each effect with latency, faults and crashes
  between steps (a crash simply stops driving the generator).

So the order of effects, and what happens on each outcome, is the component's (and mirrors Go),
while time and failure are the simulator's.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""A generator that yields effects, receives their results and returns ``T``."""


def drive(steps: Steps[T], handle: Callable[[Any], Any]) -> T:
    """Run ``steps`` to the end, answering each effect with ``handle(effect)``; returns its value.

    An exception raised by ``handle`` is thrown into the generator where the effect was yielded, as a
    failed call would be; if the generator does not catch it, it propagates to the caller.
    """
    try:
        effect = next(steps)
        while True:
            try:
                result = handle(effect)
            except Exception as exc:  # noqa: BLE001 - the component decides what a failure means
                effect = steps.throw(exc)
            else:
                effect = steps.send(result)
    except StopIteration as stop:
        return stop.value
