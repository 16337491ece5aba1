"""``timestampOracle``: the pre-allocated time window behind rootcoord's TSO.

Models ``internal/tso/tso.go`` (Milvus 2.5, itself a trimmed copy of TiKV PD's ``pkg/tso/tso.go``).

The oracle keeps an in-memory window start ``TSO = {physical, logical}`` and a window end saved in
the KV (``lastSavedTime``). Timestamps are handed out from memory while ``physical`` stays below
the saved end; the end is pushed 3 s further whenever ``physical`` comes within 1 ms of it. Because
a new active rootcoord starts *after* the saved end, nothing it hands out can be smaller than what
its predecessor handed out, whatever the two clocks say.

Go's ``time.Time`` becomes integer Unix nanoseconds; ``ZeroTime`` becomes 0. The clock, the KV and
the recorder are injected, so a unit test drives every branch step by step.

Simplifications: Go swaps the ``TSO`` pointer atomically and bumps ``logical`` with an atomic add;
here the caller serialises access (the simulator is single-threaded, the live server holds a lock).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import MS, BugSwitches, TSOParams
from ..events import NULL_RECORDER, Recorder
from ..tsoutil import physical_time
from ..storage.kv import KeyNotFoundError, KVError, bytes_to_uint64_big_endian, uint64_to_bytes_big_endian

ZERO_TIME = 0


def _int64(v: int) -> int:
    """``v`` as Go's int64 arithmetic leaves it: wrapped into [-2**63, 2**63)."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def sub_time_by_wall_clock(after_ns: int, before_ns: int) -> int:
    """``typeutil.SubTimeByWallClock``: ``after.UnixNano() - before.UnixNano()`` as a ``time.Duration`` (ns).

    Each ``UnixNano()`` is an int64 that wraps for instants after 2262-04-11 (Go leaves it "undefined" and the
    multiplication overflows), and so does the difference: a time that far ahead compares as far behind."""
    return _int64(_int64(after_ns) - _int64(before_ns))


@dataclass
class AtomicObject:
    """``atomicObject``: the window start. ``logical`` is bumped in place by GenerateTSO."""

    physical_ns: int
    logical: int = 0

    @property
    def physical_ms(self) -> int:
        """``physical.UnixMilli()``."""
        return self.physical_ns // MS


class TimestampOracle:
    """``timestampOracle``: InitTimestamp, UpdateTimestamp, ResetUserTimestamp, ResetTimestamp."""

    def __init__(
        self,
        key: str,
        txn_kv,
        now_ns: Callable[[], int],
        params: TSOParams | None = None,
        switches: BugSwitches | None = None,
        recorder: Recorder = NULL_RECORDER,
        node: str = "rootcoord",
    ):
        self.key = key
        self.txn_kv = txn_kv
        self.now_ns = now_ns
        self.params = params or TSOParams()
        self.switches = switches or BugSwitches()
        self.recorder = recorder
        self.node = node
        self._emit_update = recorder.emitter("tso.update", "clock_ms", "detail", "physical_ms", "logical",
                                             "window_end_ms")
        self.tso: AtomicObject | None = None
        self.last_saved_time_ns: int = ZERO_TIME

    # ---- helpers --------------------------------------------------------------------------
    def _state(self) -> dict:
        cur = self.tso
        return {
            "physical_ms": None if cur is None else cur.physical_ms,
            "logical": None if cur is None else cur.logical,
            "window_end_ms": self.last_saved_time_ns // MS if self.last_saved_time_ns else None,
        }

    def load_timestamp(self) -> int:
        """``loadTimestamp``: the saved window end, or ZeroTime.

        Quirk reproduced from 2.5: *any* load error counts as "nothing saved" (master retries and
        fails start-up instead).
        """
        try:
            data = self.txn_kv.load(self.key)
        except (KeyNotFoundError, KVError):
            return ZERO_TIME
        if not data:
            return ZERO_TIME
        return bytes_to_uint64_big_endian(data)

    def save_timestamp(self, ts_ns: int) -> None:
        """``saveTimestamp``: write the window end (8-byte big-endian UnixNano); remember it on success."""
        now = self.now_ns()
        try:
            self.txn_kv.save(self.key, uint64_to_bytes_big_endian(ts_ns))
        except KVError as exc:
            self.recorder.emit("tso.save_failed", self.node, error=str(exc), clock_ms=now // MS)
            raise
        self.last_saved_time_ns = ts_ns
        self.recorder.emit("tso.save", self.node, window_end_ms=ts_ns // MS, clock_ms=now // MS)

    # ---- the four operations ------------------------------------------------------------------
    def init_timestamp(self) -> None:
        """``InitTimestamp``: start one guard past the saved window (or now, if later); save a new window.

        On a save error the oracle is left untouched and the error propagates.
        """
        last = self.load_timestamp()
        detail = {"loaded_window_end_ms": last // MS}
        if self.switches.tso_skip_load_on_init:
            detail = {"ignored_window_end_ms": last // MS, "bug_switch": "tso_skip_load_on_init"}
            last = ZERO_TIME
        now = self.now_ns()
        nxt = now
        if sub_time_by_wall_clock(nxt, last) < self.params.update_timestamp_guard_ns:
            nxt = last + self.params.update_timestamp_guard_ns
        self.save_timestamp(nxt + self.params.save_interval_ns)
        self.tso = AtomicObject(nxt, 0)
        self.recorder.emit(
            "tso.init", self.node, clock_ms=now // MS,
            detail={**detail, "started_after_window": nxt != now},
            **self._state(),
        )

    def update_timestamp(self) -> None:
        """``UpdateTimestamp``, run every 50 ms by rootcoord's ``tsLoop``.

        * the clock moved more than 1 ms past ``physical``: jump to the clock;
        * else, more than half the logical space is used: step ``physical`` by 1 ms;
        * else: keep allocating on the same physical (no change).

        When the new ``physical`` is within 1 ms of the saved end, a new end (``physical + 3 s``) is
        saved first; if that fails nothing changes and the error propagates.
        """
        prev = self.tso
        if prev is None:
            raise RuntimeError("UpdateTimestamp before InitTimestamp")
        now = self.now_ns()
        jet_lag = sub_time_by_wall_clock(now, prev.physical_ns)
        if jet_lag > self.params.update_timestamp_guard_ns:
            nxt, reason = now, "clock"
        elif prev.logical > self.params.max_logical // 2:
            nxt, reason = prev.physical_ns + MS, "logical_half"
        else:
            return
        if not self.switches.tso_no_window_save:
            if sub_time_by_wall_clock(self.last_saved_time_ns, nxt) <= self.params.update_timestamp_guard_ns:
                self.save_timestamp(nxt + self.params.save_interval_ns)
        self.tso = AtomicObject(nxt, 0)
        detail = {"reason": reason, "jet_lag_ms": jet_lag / MS}
        if jet_lag > 3 * self.params.update_timestamp_step_ns:
            detail["warning"] = "clock offset is huge, check network latency and clock skew"
        state = self._state()
        self._emit_update(self.node, now // MS, detail, state["physical_ms"], state["logical"], state["window_end_ms"])

    def reset_user_timestamp(self, tso: int) -> None:
        """``ResetUserTimestamp`` (SetTSO): move the window forward to a user ts, by at most 3 s.

        Errors: the target is not more than 3 guards (3 ms) ahead of ``physical``, or 3 s or more ahead (compared
        as Go does, :func:`sub_time_by_wall_clock`: a target after 2262 counts as behind).
        """
        prev = self.tso
        if prev is None:
            raise RuntimeError("ResetUserTimestamp before InitTimestamp")
        nxt = (physical_time(tso) + 1) * MS
        gap = sub_time_by_wall_clock(nxt, prev.physical_ns)
        if gap <= 3 * self.params.update_timestamp_guard_ns:
            err = "the specified ts too small than now"
        elif gap >= self.params.max_reset_ts_gap_ns:
            err = "the specified ts too large than now"
        else:
            err = None
        if err:
            self.recorder.emit("tso.set", self.node, ts=_int64_or_none(tso), error=err, **self._state())
            raise ValueError(err)
        self.save_timestamp(nxt + self.params.save_interval_ns)
        if self.tso is prev:  # CompareAndSwapPointer; a lost race is silently ignored, as in Go
            self.tso = AtomicObject(nxt, 0)
        self.recorder.emit("tso.set", self.node, ts=tso, **self._state())

    def reset_timestamp(self) -> None:
        """``ResetTimestamp``: ``TSO = {now, 0}`` without touching the KV."""
        now = self.now_ns()
        self.tso = AtomicObject(now, 0)
        state = self._state()
        self.recorder.emit("tso.reset", self.node, physical_ms=state["physical_ms"], logical=0, clock_ms=now // MS)


def _int64_or_none(v: int) -> int | None:
    return v if 0 <= v < (1 << 63) else None
