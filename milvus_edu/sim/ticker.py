"""Go's ``time.Ticker`` in simulated time, for the two shapes of loop the components run on one.

A ``time.NewTicker(period)`` ticks on a fixed grid from its start, whatever its reader does; its channel
holds one tick, so a tick that falls due while the loop body runs is delivered as soon as the loop reads
again, and the ticks after it are dropped until the loop catches up with the grid.

* ``for { <-ticker.C; body }`` (the proxies' ``tickLoop`` and report loop, rootcoord's ``syncTsLoop``,
  time-tick loop and ``tsLoop``, the DataNode's ``TimeTickSender.work``): :class:`Ticker`, whose :meth:`Ticker.next` is
  called after each body.
* ``select { case <-ticker.C: body; case <-notify: other }`` (the DataNode's ``ChannelCheckpointUpdater``):
  the loop keeps the due time of the tick it waits for and moves it with :func:`next_grid_tick` when it
  takes the tick, before the body runs.
"""

from __future__ import annotations

import simpy


class Ticker:
    """``time.NewTicker(period)`` read by a ``for`` loop: fires on a fixed grid from its start; a tick missed
    while the loop body ran is delivered at once (the channel buffers one), then the grid goes on.

    ``offset_ms`` moves the grid: the ticks fall at ``now + offset_ms + n * period`` for n = 1, 2, ...
    (a ticker created ``offset_ms`` later; a negative offset, above ``-period``, one created earlier)."""

    def __init__(self, env: simpy.Environment, period_ms: float, offset_ms: float = 0.0):
        if not period_ms > 0:
            raise ValueError(f"a ticker's period must be positive, got {period_ms} ms")
        self.env = env
        self.period = period_ms
        self.start = env.now + offset_ms
        self.n = 0

    def next(self) -> simpy.Timeout:
        """The event of the next tick."""
        self.n += 1
        due = self.start + self.n * self.period
        if due < self.env.now:
            self.n = int((self.env.now - self.start) // self.period)
            return self.env.timeout(0)
        return self.env.timeout(due - self.env.now)


def next_grid_tick(taken_ms: float, period_ms: float, now_ms: float) -> float:
    """When a ``time.Ticker`` of ``period_ms`` delivers next, its tick due at ``taken_ms`` having been taken at
    ``now_ms``: the first point of its grid after ``now_ms``, as the ticks that fell due while one was waiting
    were dropped (``taken_ms + period_ms`` when the tick was taken on time)."""
    if period_ms <= 0:
        raise ValueError(f"a ticker's period must be positive, got {period_ms} ms")
    nxt = taken_ms + period_ms
    while nxt <= now_ms:
        nxt += period_ms
    return nxt
