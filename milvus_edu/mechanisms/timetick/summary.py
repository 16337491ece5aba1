"""The TimeTick mechanism's part of a run's summary, its CLI report line and its key events."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...events.dispatch import Dispatch, on
from ...narrate import plural, ts_text
from .kinds import DML_TYPES


@dataclass
class WrittenOrder:
    """Per pchannel, the highest ``end_ts`` written so far: a message written below it is out of order (a
    younger message is already in the pchannel). The one streaming definition; :func:`.panel.dml_messages` is
    the same over a whole run log (its ``highest`` and ``out_of_order`` columns)."""

    #: pchannel -> highest ``end_ts`` written to it so far.
    highest: dict[str, int] = field(default_factory=dict)

    def late(self, channel: str, end_ts: int) -> bool:
        """Whether a message with ``end_ts`` written to ``channel`` now is out of order; notes it if not."""
        if end_ts < self.highest.get(channel, 0):
            return True
        self.highest[channel] = end_ts
        return False


class TimeTickSummary(Dispatch):
    """Counts messages, ticks, rounds and packs while a run is recorded (memory per pchannel)."""

    def __init__(self):
        self.dml = 0
        self.out_of_order = 0
        self.ticks = 0
        self.repeated_ticks = 0
        self._last_tick: dict[str, int] = {}
        self.rounds = 0
        self._round: set[str] = set()  # the pchannels the round being written has ticked so far
        self.packs = 0
        self.consumed = 0
        self.reports = 0
        self._order = WrittenOrder()
        self._last_tick_t: dict[str, float] = {}
        self.longest_gap: tuple[float, str | None] = (0.0, None)

    # Each kind changes counts of its own only, so each is folded a batch at a time (see ``on``).

    @on("mq.produce", columns=("channel", "msg_type", "tick_ts", "t_ms", "end_ts"), fold=True)
    def _produced(self, seqs, channels, msg_types, tick_tss, t_mss, end_tss) -> None:
        last_tick, last_tick_t, late = self._last_tick, self._last_tick_t, self._order.late
        for ch, msg_type, tick_ts, t_ms, end_ts in zip(channels, msg_types, tick_tss, t_mss, end_tss):
            if msg_type == "TimeTick":
                self.ticks += 1
                # A round writes one tick to every pchannel and the next starts only once it is written (startWatch),
                # so a pchannel ticked twice starts a new round. Counted from the ticks, not from the reports that
                # completed a round: delSession sends one too, and its round has no report behind it.
                if ch in self._round or not self._round:
                    self.rounds += 1
                    self._round.clear()
                self._round.add(ch)
                if last_tick.get(ch) == tick_ts:
                    self.repeated_ticks += 1
                last_tick[ch] = tick_ts
                last = last_tick_t.get(ch)
                if last is not None and t_ms - last > self.longest_gap[0]:
                    self.longest_gap = (t_ms - last, ch)
                last_tick_t[ch] = t_ms
            elif msg_type in DML_TYPES:
                self.dml += 1
                self.out_of_order += late(ch, end_ts)

    @on("mq.pack", columns=(), fold=True)
    def _packs(self, seqs) -> None:
        self.packs += len(seqs)

    @on("mq.consume", columns=(), fold=True)
    def _consumed(self, seqs) -> None:
        self.consumed += len(seqs)

    @on("proxy.report", columns=(), fold=True)
    def _reported(self, seqs) -> None:
        self.reports += len(seqs)

    def sections(self, counts: dict) -> dict:
        """The ``timetick`` section of ``summary.json``."""
        gap, ch = self.longest_gap
        return {"timetick": {
            "pchannels": sorted(set(self._last_tick_t) | set(self._order.highest)),
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
    packs = f", {plural(t['packs'], 'pack')} consumed" if t["packs"] else ""
    return [f"{plural(t['dml_messages'], 'DML message')} on {plural(len(t['pchannels']), 'pchannel')} "
            f"({t['out_of_order_messages']:,} written out of timestamp order), {plural(t['time_ticks'], 'time tick')} "
            f"in {plural(t['tick_rounds'], 'round')}{packs}; longest gap between two ticks on one pchannel "
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
        self.order = WrittenOrder()
        self.highest_msg: dict[str, int] = {}  # pchannel -> id of the message that holds its highest end_ts
        self.late_note: list[str] = []
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
            late = ts is not None and self.order.late(ch, ts)
            if late and not self.first_late:
                # its sentence alone ("writes Insert message 3 ... ts 00:00:00.200+2") does not say why it is shown
                self.late_note = [f"(event {int(row['seq']) + 1:,} is the first message written out of timestamp "
                                  f"order: its ts {ts_text(ts)} is below that of message {self.highest_msg[ch]} "
                                  f"({ts_text(self.order.highest[ch])}), already in {ch})"]
            elif not late and ts is not None:
                self.highest_msg[ch] = row["msg_id"]
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
        """Why the first out-of-order message was shown, when there was one."""
        return self.late_note
