"""The TimeTick mechanism's part of a run's summary, its CLI report line and its key events."""

from __future__ import annotations

from ...check.violation import Read, batch_columns, column, detail_of
from ...narrate import detail_dict

# What the fast path (TimeTickSummary.write_batch) reads of the message rows, in seq order; the other kinds it counts.
_PRODUCE = {"mq.produce": Read(0, ("channel", "msg_type", "tick_ts", "t_ms", "end_ts"))}


class TimeTickSummary:
    """Counts messages, ticks, rounds and packs while a run is recorded (memory per pchannel)."""

    #: The only kinds it reads (the recorder hands it no others).
    kinds = frozenset({"mq.produce", "rootcoord.timetick_update", "mq.pack", "mq.consume", "proxy.report"})

    def __init__(self):
        self.dml = 0
        self.out_of_order = 0
        self.ticks = 0
        self.repeated_ticks = 0
        self._last_tick: dict[str, int] = {}
        self.rounds = 0
        self.packs = 0
        self.consumed = 0
        self.reports = 0
        self._max_dml: dict[str, int] = {}
        self._last_tick_t: dict[str, float] = {}
        self.longest_gap: tuple[float, str | None] = (0.0, None)

    def write(self, row: dict) -> None:
        """Account for one row."""
        kind = row["kind"]
        if kind == "mq.produce":
            ch = row["channel"]
            if row["msg_type"] == "TimeTick":
                self.ticks += 1
                if self._last_tick.get(ch) == row["tick_ts"]:
                    self.repeated_ticks += 1
                self._last_tick[ch] = row["tick_ts"]
                last = self._last_tick_t.get(ch)
                if last is not None and row["t_ms"] - last > self.longest_gap[0]:
                    self.longest_gap = (row["t_ms"] - last, ch)
                self._last_tick_t[ch] = row["t_ms"]
            elif row["msg_type"] in ("Insert", "Delete"):
                self.dml += 1
                ts = row["end_ts"]
                if ts < self._max_dml.get(ch, 0):
                    self.out_of_order += 1
                else:
                    self._max_dml[ch] = ts
        elif kind == "rootcoord.timetick_update":
            if detail_dict(row["detail"]).get("sent"):
                self.rounds += 1
        elif kind == "mq.pack":
            self.packs += 1
        elif kind == "mq.consume":
            self.consumed += 1
        elif kind == "proxy.report":
            self.reports += 1

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, reading the columns it needs straight from the batch's tuples.

        Only the ``mq.produce`` rows are read one by one, in ``seq`` order (a channel's ticks and messages
        depend on the ones before); the other kinds are counted a group at a time, since nothing else depends
        on their order. It mirrors :meth:`write` branch by branch; ``tests/test_checker_fast.py`` proves both
        give the same section on real runs.
        """
        last_tick, last_tick_t, max_dml = self._last_tick, self._last_tick_t, self._max_dml
        for _, _, (ch, msg_type, tick_ts, t_ms, end_ts) in batch_columns(batch, _PRODUCE):
            if msg_type == "TimeTick":
                self.ticks += 1
                if last_tick.get(ch) == tick_ts:
                    self.repeated_ticks += 1
                last_tick[ch] = tick_ts
                last = last_tick_t.get(ch)
                if last is not None and t_ms - last > self.longest_gap[0]:
                    self.longest_gap = (t_ms - last, ch)
                last_tick_t[ch] = t_ms
            elif msg_type in ("Insert", "Delete"):
                self.dml += 1
                if end_ts < max_dml.get(ch, 0):
                    self.out_of_order += 1
                else:
                    max_dml[ch] = end_ts
        for layout, values in batch.groups.items():
            kind = layout.kind
            if kind == "rootcoord.timetick_update":
                self.rounds += sum(1 for detail in column(layout, values, "detail") if detail_of(detail).get("sent"))
            elif kind == "mq.pack":
                self.packs += len(values)
            elif kind == "mq.consume":
                self.consumed += len(values)
            elif kind == "proxy.report":
                self.reports += len(values)

    def close(self) -> None:
        """Nothing to release."""

    def sections(self, counts: dict) -> dict:
        """The ``timetick`` section of ``summary.json``."""
        gap, ch = self.longest_gap
        return {"timetick": {
            "pchannels": sorted(set(self._last_tick_t) | set(self._max_dml)),
            "dml_messages": self.dml,
            "out_of_order_messages": self.out_of_order,
            "proxy_reports": self.reports,
            "tick_rounds": self.rounds,
            "time_ticks": self.ticks,
            "repeated_ticks": self.repeated_ticks,
            "packs": self.packs,
            "messages_consumed": self.consumed,
            "longest_tick_gap_ms": round(gap, 3),
            "longest_tick_gap_channel": ch,
        }}


def report(summary: dict) -> list[str]:
    """The TimeTick line in the CLI's report of a run."""
    t = summary.get("timetick")
    if not t:
        return []
    # Packs count only the TimeTick scenarios' own consumers; a run whose readers are the QueryNode and DataNode
    # pipelines reports its packs in their lines, so "0 packs consumed" would only contradict them.
    packs = f", {t['packs']:,} packs consumed" if t["packs"] else ""
    return [f"{t['dml_messages']:,} DML messages on {len(t['pchannels'])} pchannels "
            f"({t['out_of_order_messages']:,} written out of timestamp order), {t['time_ticks']:,} time ticks in "
            f"{t['tick_rounds']:,} rounds{packs}; longest gap between two ticks "
            f"{t['longest_tick_gap_ms'] / 1000:.2f} s"]


class KeyEvents:
    """Which TimeTick events ``milvus-edu timeline`` prints by default: session changes, the first message, the
    first tick, the first out-of-order write and the first round that went out, the first pack with messages of
    each vchannel, and every tick after a gap of more than a second."""

    def __init__(self):
        self.first_tick: set[str] = set()
        self.first_pack: set[str] = set()
        self.first_dml = False
        self.first_late = False
        self.first_round = False
        self.max_dml: dict[str, int] = {}
        self.last_tick_t: dict[str, float] = {}

    def show(self, row: dict) -> bool:
        """Whether ``row`` is a key event (call once per row, in order)."""
        kind = row["kind"]
        if kind in ("rootcoord.session_add", "rootcoord.session_del"):
            return True
        if kind == "mq.produce" and row["msg_type"] == "TimeTick":
            ch = row["channel"]
            gap = row["t_ms"] - self.last_tick_t.get(ch, row["t_ms"])
            self.last_tick_t[ch] = row["t_ms"]
            if ch not in self.first_tick:
                self.first_tick.add(ch)
                return True
            return gap > 1000.0
        if kind == "mq.produce":
            ch, ts = row["channel"], row["end_ts"]
            late = ts is not None and ts < self.max_dml.get(ch, 0)
            self.max_dml[ch] = max(self.max_dml.get(ch, 0), ts or 0)
            if not self.first_dml or (late and not self.first_late):
                self.first_dml = True
                self.first_late = self.first_late or late
                return True
            return False
        if kind == "rootcoord.timetick_update" and not self.first_round and '"sent":true' in str(row["detail"]):
            self.first_round = True
            return True
        if kind == "mq.pack" and row["count"] and row["vchannel"] not in self.first_pack:
            self.first_pack.add(row["vchannel"])
            return True
        return False

    def notes(self) -> list[str]:
        """Nothing to add after the timeline."""
        return []
