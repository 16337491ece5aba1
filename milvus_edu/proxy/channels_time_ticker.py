"""The proxy's channels time ticker and the body of its report loop.

Models ``internal/proxy/channels_time_ticker.go`` (Milvus 2.5, ``channelsTimeTickerImpl``: ``start``,
``tick``, ``getMinTsStatistics``, ``getLastTick``, ``getMinTick``) and the body of
``Proxy.sendChannelsTimeTickLoop`` in ``internal/proxy/proxy.go``.

Every ``proxy.timeTickInterval / 2`` (100 ms) the ticker allocates ``now`` from the TSO, reads the DML
queue's pchannel statistics and derives, per pchannel, the value it will report to rootcoord:
``minTs - 1`` of the unfinished tasks, or ``now`` (the default timestamp) for pchannels with none.
``currents`` is a gate: a busy pchannel's value only moves once its in-flight minimum has passed the
gate, and the gate is then set to ``min(now + interval, maxTs)``.

Quirk 4 (reference §6): Go computes that gate as ``now + Timestamp(200ms as a Duration)``, adding
200,000,000 raw units to a hybrid timestamp, which is about 763 ms of physical time plus a logical
offset rather than 200 ms. ``TimeTickParams.ticker_fixed_interval_unit`` switches to the intended
``AddPhysicalDurationOnTs(now, 200 ms)``; both are capped by ``maxTs``.

Simplification: ``tick`` is split into the allocation + statistics read (``tick``) and the pure update
(``tick_with``) so the simulator can allocate over a simulated RPC and then apply the result.
Simplification: no ``tickLoop``, ``close`` or send loop goroutines; the simulator calls ``tick`` and
``channels_time_tick_msg`` on its own timers and sends the message itself.
Simplification: log lines are not modelled; what they report is in :class:`TickResult` instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..config import TimeTickParams
from ..proto import ChannelTimeTickMsg, MsgBase, MsgType
from ..tsoutil import add_physical_duration_on_ts
from .task_scheduler import PChanStatistics


@dataclass(frozen=True)
class TickResult:
    """What one ``tick`` changed (Go only logs some of it); channel names are sorted.

    ``deleted``: tracked pchans absent from the statistics, forgotten. ``advanced``: tracked pchans
    whose minimum passed the gate, so their reported value and gate moved. ``added``: pchans seen for
    the first time. ``skipped_zero``: pchans with ``minTs == 0``, warned about and ignored.
    """

    now: int
    deleted: tuple[str, ...]
    advanced: tuple[str, ...]
    added: tuple[str, ...]
    skipped_zero: tuple[str, ...]
    min_timestamp: int


class ChannelsTimeTicker:
    """``channelsTimeTickerImpl``: per-pchannel "everything below this is sent" values for rootcoord.

    ``alloc_one`` returns a fresh ts from the TSO (``tso.AllocOne``); ``get_statistics`` returns
    ``{pchan: PChanStatistics}`` (``taskScheduler.getPChanStatistics``) and may raise. ``pchans``
    are the channels tracked from construction (the proxy passes none).
    """

    def __init__(
        self,
        alloc_one: Callable[[], int],
        get_statistics: Callable[[], Mapping[str, PChanStatistics]],
        params: TimeTickParams | None = None,
        pchans: Iterable[str] = (),
    ):
        self.alloc_one = alloc_one
        self.get_statistics = get_statistics
        self.params = params or TimeTickParams()
        self._min_ts_statistics: dict[str, int] = {p: 0 for p in pchans}
        self._currents: dict[str, int] = {p: 0 for p in self._min_ts_statistics}
        self._default_timestamp = 0
        self._min_timestamp = 0
        self._mtx = threading.Lock()  # Go: statisticsMtx

    # ----------------------------------------------------------------- read-only state

    @property
    def min_ts_statistics(self) -> Mapping[str, int]:
        """``minTsStatistics``: pchan -> the value to report (read-only live view)."""
        return MappingProxyType(self._min_ts_statistics)

    @property
    def currents(self) -> Mapping[str, int]:
        """``currents``: pchan -> the gate the in-flight minimum must pass (read-only live view)."""
        return MappingProxyType(self._currents)

    @property
    def default_timestamp(self) -> int:
        """``defaultTimestamp``: the ``now`` of the last successful tick (0 before the first)."""
        return self._default_timestamp

    @property
    def min_timestamp(self) -> int:
        """``minTimestamp``: what :meth:`get_min_tick` returns."""
        return self._min_timestamp

    # ----------------------------------------------------------------- Go methods

    def start(self) -> int:
        """``start``: zero every tracked pchan's value, then set every gate to one fresh ts.

        Returns that ts. An allocation error propagates after the values were zeroed (as in Go).
        """
        with self._mtx:
            for pchan in self._min_ts_statistics:
                self._min_ts_statistics[pchan] = 0
        current = self.alloc_one()
        with self._mtx:
            for pchan in self._currents:
                self._currents[pchan] = current
        return current

    def next_gate(self, now: int) -> int:
        """The uncapped gate ``tick`` sets: ``now + interval`` (quirk 4) or ``now`` + 200 ms physical."""
        if self.params.ticker_fixed_interval_unit:
            return add_physical_duration_on_ts(now, self.params.time_tick_interval_ns)
        return now + self.params.time_tick_interval_ns

    def tick(self) -> TickResult | None:
        """``tick``: allocate ``now``, read the statistics, apply :meth:`tick_with`.

        An allocation error propagates and changes nothing; a statistics error changes nothing and
        returns None (Go logs it and returns nil).
        """
        now = self.alloc_one()
        try:
            stats = self.get_statistics()
        except Exception:  # Go: any error from getStatisticsFunc is logged and the tick is skipped
            return None
        return self.tick_with(now, stats)

    def tick_with(self, now: int, stats: Mapping[str, PChanStatistics]) -> TickResult:
        """The body of ``tick`` after the allocation and the statistics read (reference §2.3)."""
        if now < 0:
            raise ValueError(f"now must be a timestamp >= 0, got {now}")
        deleted, advanced, added, skipped = [], [], [], []
        with self._mtx:
            self._default_timestamp = now
            min_ts = now
            for pchan in list(self._currents):
                stat = stats.get(pchan)
                if stat is None:
                    del self._min_ts_statistics[pchan]
                    del self._currents[pchan]
                    deleted.append(pchan)
                    continue
                if stat.min_ts > self._currents[pchan]:
                    self._min_ts_statistics[pchan] = stat.min_ts - 1
                    self._currents[pchan] = min(self.next_gate(now), stat.max_ts)
                    advanced.append(pchan)
                min_ts = min(min_ts, self._min_ts_statistics[pchan])
            for pchan in sorted(stats):
                value = stats[pchan]
                if value.min_ts == 0:
                    skipped.append(pchan)
                    continue
                if pchan not in self._currents:
                    self._min_ts_statistics[pchan] = value.min_ts - 1
                    self._currents[pchan] = now
                    added.append(pchan)
                min_ts = min(min_ts, value.min_ts - 1)
            self._min_timestamp = min_ts
        return TickResult(now, tuple(sorted(deleted)), tuple(sorted(advanced)), tuple(added), tuple(skipped), min_ts)

    def get_min_ts_statistics(self) -> tuple[dict[str, int], int]:
        """``getMinTsStatistics``: ``({pchan: value for values > 0}, defaultTimestamp)``."""
        with self._mtx:
            return {p: v for p, v in self._min_ts_statistics.items() if v > 0}, self._default_timestamp

    def get_last_tick(self, pchan: str) -> int:
        """``getLastTick``: the pchan's value, or ``defaultTimestamp`` when it is not tracked."""
        with self._mtx:
            return self._min_ts_statistics.get(pchan, self._default_timestamp)

    def get_min_tick(self) -> int:
        """``getMinTick``: ``minTimestamp`` (0 before the first tick)."""
        with self._mtx:
            return self._min_timestamp


def channels_time_tick_msg(ticker: ChannelsTimeTicker, source_id: int) -> ChannelTimeTickMsg | None:
    """One round of ``Proxy.sendChannelsTimeTickLoop``: the report to send to rootcoord, or None.

    None when ``common.ttMsgEnabled`` is off or the default timestamp is still 0 (no tick yet).
    ``DefaultTimestamp = max(defaultTimestamp, every reported value)``. Channels are listed in sorted
    order so runs are deterministic (Go follows its map order, which rootcoord does not depend on).
    """
    if not ticker.params.tt_msg_enabled:
        return None
    stats, ts = ticker.get_min_ts_statistics()
    if ts == 0:
        return None
    channels = tuple(sorted(stats))
    timestamps = tuple(stats[c] for c in channels)
    return ChannelTimeTickMsg(
        base=MsgBase(msg_type=MsgType.TIME_TICK, source_id=source_id),
        channel_names=channels,
        timestamps=timestamps,
        default_timestamp=max((ts, *timestamps)),
    )
