"""Hybrid timestamps: 46 bits of physical milliseconds, 18 bits of logical counter.

Models ``pkg/util/tsoutil/tso.go`` (Milvus 2.5). A hybrid timestamp ("ts") is a 64-bit integer::

    ts = (physical_ms << 18) + logical

``compose_ts`` uses ``+`` exactly like Go's ``ComposeTS``, not ``|``: a logical value of 2**18 or more
carries into the physical bits (Milvus relies on this when ``LimitMaxLogic`` is off).

Go's ``time.Time`` values become integer nanoseconds since the Unix epoch here (``unix_ns``), and
``time.Duration`` becomes integer nanoseconds too, so arithmetic is exact and deterministic.
"""

from __future__ import annotations

import datetime as _dt

#: Number of bits used by the logical counter (``logicalBits``).
LOGICAL_BITS = 18
#: Mask of the logical bits (``logicalBitsMask``).
LOGICAL_BITS_MASK = (1 << LOGICAL_BITS) - 1
#: Largest value a Milvus timestamp can hold (Go's ``math.MaxUint64``, ``typeutil.MaxTimestamp``).
MAX_TIMESTAMP = (1 << 64) - 1

NS_PER_MS = 1_000_000
_MIN_VALID_PHYSICAL_MS = 1546300800000  # 2019-01-01T00:00:00Z
_MAX_VALID_PHYSICAL_MS = 253402300799000  # 9999-12-31T23:59:59Z
_MS_PER_DAY = 24 * 3600 * 1000


def compose_ts(physical: int, logical: int) -> int:
    """``ComposeTS``: ``(physical << 18) + logical``, truncated to 64 bits like Go's ``uint64``."""
    return ((int(physical) << LOGICAL_BITS) + int(logical)) & MAX_TIMESTAMP


def compose_ts_by_time(unix_ns: int, logical: int = 0) -> int:
    """``ComposeTSByTime``: a hybrid ts from a wall-clock instant (nanoseconds) and a logical value.

    Go divides ``UnixNano()`` by a millisecond with integer division, which truncates toward zero (an instant
    before 1970 rounds up, not down)."""
    ms = -(-unix_ns // NS_PER_MS) if unix_ns < 0 else unix_ns // NS_PER_MS
    return compose_ts(ms, logical)


def get_current_time(now_ns: int) -> int:
    """``GetCurrentTime``: ``ComposeTSByTime(now, 0)``; the clock reading is passed in."""
    return compose_ts_by_time(now_ns, 0)


def physical_datetime(physical_ms: int) -> _dt.datetime:
    """A physical part (Unix milliseconds) as an aware UTC ``datetime`` (Go's ``time.UnixMilli(...).UTC()``)."""
    return _dt.datetime.fromtimestamp(0, tz=_dt.timezone.utc) + _dt.timedelta(milliseconds=physical_ms)


def parse_ts(ts: int) -> tuple[_dt.datetime, int]:
    """``ParseTS``: the physical part as an aware UTC ``datetime`` and the logical part."""
    physical, logical = parse_hybrid_ts(ts)
    return physical_datetime(physical), logical


def parse_hybrid_ts(ts: int) -> tuple[int, int]:
    """``ParseHybridTs``: ``(physical_ms, logical)``."""
    return int(ts) >> LOGICAL_BITS, int(ts) & LOGICAL_BITS_MASK


def physical_time(ts: int) -> int:
    """``PhysicalTime``: the physical part in milliseconds since the epoch."""
    return int(ts) >> LOGICAL_BITS


def physical_time_seconds(ts: int) -> float:
    """``PhysicalTimeSeconds``: the physical part in (fractional) seconds."""
    return float(int(ts) >> LOGICAL_BITS) / 1000.0


def logical_part(ts: int) -> int:
    """The logical part of a hybrid timestamp (``ts & logicalBitsMask``)."""
    return int(ts) & LOGICAL_BITS_MASK


def calculate_duration(ts1: int, ts2: int) -> int:
    """``CalculateDuration``: ``phys(ts1) - phys(ts2)`` in milliseconds; logical parts are ignored."""
    return physical_time(ts1) - physical_time(ts2)


def add_physical_duration_on_ts(ts: int, duration_ns: int) -> int:
    """``AddPhysicalDurationOnTs``: shift the physical part by a duration, keep the logical part.

    ``duration_ns`` may be negative; like Go's ``Duration.Milliseconds()`` it is truncated toward
    zero to whole milliseconds.
    """
    ms = -((-duration_ns) // NS_PER_MS) if duration_ns < 0 else duration_ns // NS_PER_MS
    physical, logical = parse_hybrid_ts(ts)
    return compose_ts(physical + ms, logical)


def sub_by_now(ts: int, now_ns: int) -> int:
    """``SubByNow``: milliseconds from the ts's physical part to ``now``."""
    return now_ns // NS_PER_MS - physical_time(ts)


def mod_24h(ts: int) -> int:
    """``Mod24H``: keep the physical part modulo one day, keep the logical part."""
    physical, logical = parse_hybrid_ts(ts)
    return compose_ts(physical % _MS_PER_DAY, logical)


def is_valid_physical_ts(physical_ms: int) -> bool:
    """``IsValidPhysicalTs``: between 2019-01-01 and 9999-12-31 (milliseconds, inclusive)."""
    return _MIN_VALID_PHYSICAL_MS <= int(physical_ms) <= _MAX_VALID_PHYSICAL_MS


def is_valid_hybrid_ts(ts: int) -> bool:
    """``IsValidHybridTs``: the physical part passes :func:`is_valid_physical_ts`."""
    return is_valid_physical_ts(physical_time(ts))


def format_ts(ts: int) -> str:
    """A human-readable rendering, ``HH:MM:SS.mmm+logical`` (UTC), used by timelines and docs."""
    when, logical = parse_ts(ts)
    return f"{when:%H:%M:%S}.{when.microsecond // 1000:03d}+{logical}"
