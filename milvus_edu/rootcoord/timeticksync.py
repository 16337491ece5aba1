"""RootCoord's time-tick sync: the gate that turns proxy reports into one time tick per DML channel.

Models ``internal/rootcoord/timeticksync.go`` (``timetickSync``, ``chanTsMsg``, ``ttHistogram``,
``minTimeTick``) and, as functions, the parts of ``internal/rootcoord/root_coord.go`` that feed it:
``Core.UpdateChannelTimeTick`` (the RPC every proxy calls every 200 ms), ``Core.sendTimeTick`` and
``Core.sendMinDdlTsAsTt`` (rootcoord's own report as the DDL source, id -1). They are written here
because they only move data into :class:`TimetickSync`; they belong to ``Core`` in Go.

The gate: rootcoord keeps the latest report of every source (each proxy, plus the DDL source) since
the last round. A round starts only when *every* source has reported; the reports are then handed
over as one snapshot and every entry is reset. For each DML channel the DDL source lists, the round
broadcasts the minimum over all sources, so a tick never passes a timestamp some proxy may still write.

Simplification: sessions are server ids, not ``sessionutil.Session`` values.
Simplification: Go's mutex is left out; the caller serialises calls (the simulator is single-threaded).
Simplification: ``sendChan`` (capacity 1) is the one-slot :attr:`TimetickSync.pending`; the ``startWatch``
goroutine is :meth:`TimetickSync.watch_round`, called by the simulator, which broadcasts the result itself.
Simplification: ``dmlChannels`` (naming, assignment, the msgstream producers) is not here; callers pass
the DML channel list and do the broadcast.
Simplification: logs and metrics (the idle-session warning, the slow-round warning, the 2-minute
``LongTermChecker``) are not modelled; the state they print is readable instead.
Simplification: the streaming-service mode of 2.5 (where all of this is switched off) is not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..proto import ChannelTimeTickMsg, MsgBase, MsgType
from ..tsoutil import MAX_TIMESTAMP

DDL_SOURCE_ID = -1  # ddlSourceID: rootcoord's own DDL report in sess2ChanTsMap
ZERO_TIMESTAMP = 0  # typeutil.ZeroTimestamp

IGNORED_EMPTY = "empty message"
IGNORED_GO_BACK = "timestamp go back"

SKIP_DISABLED = "disabled"  # common.ttMsgEnabled is false
SKIP_UNHEALTHY = "unhealthy"  # "rootCoord is not healthy, skip send timetick"
SKIP_STARTING = "starting"  # "zero ts was met, this should be only occurred in starting state"
SKIP_ABNORMAL = "abnormal"  # "ddl ts is abnormal, max ts was met"

CODE_SUCCESS = 0
CODE_SERVICE_NOT_READY = 1  # merr.ErrServiceNotReady
CODE_PARAMETER_INVALID = 1100  # merr.ErrParameterInvalid
CODE_UNEXPECTED = (1 << 16) - 1  # merr.errUnexpected: what merr.Code gives a plain Go error


class UpdateTimeTickError(ValueError):
    """An error ``timetickSync.updateTimeTick`` returns; the text is Milvus's own."""


@dataclass(frozen=True)
class ChanTsMsg:
    """``chanTsMsg``: one source's latest report; ``cnt`` counts its reports since the last round."""

    chan_ts_map: Mapping[str, int]
    default_ts: int
    cnt: int

    @classmethod
    def from_msg(cls, msg: ChannelTimeTickMsg, cnt: int) -> "ChanTsMsg":
        """``newChanTsMsg``: a later duplicate channel name overwrites an earlier one, as in a Go map."""
        return cls(MappingProxyType(dict(zip(msg.channel_names, msg.timestamps))), msg.default_timestamp, cnt)

    def get_timetick(self, channel: str) -> int:
        """``getTimetick``: the channel's own value, else the default (the proxy has no DML in flight there)."""
        return self.chan_ts_map.get(channel, self.default_ts)


Snapshot = Mapping[int, ChanTsMsg]


class TtHistogram:
    """``ttHistogram``: the last time tick broadcast to each channel."""

    def __init__(self):
        self._ts: dict[str, int] = {}

    def update(self, channel: str, ts: int) -> None:
        """``update``: remember ``ts`` as the channel's last broadcast tick."""
        self._ts[channel] = ts

    def get(self, channel: str) -> int:
        """``get``: the channel's last broadcast tick, 0 if none was broadcast yet."""
        return self._ts.get(channel, ZERO_TIMESTAMP)

    def remove(self, *channels: str) -> None:
        """``remove``: forget the channels (absent ones are ignored)."""
        for channel in channels:
            self._ts.pop(channel, None)

    def items(self) -> list[tuple[str, int]]:
        """Every ``(channel, tick)`` in the order channels were first broadcast to."""
        return list(self._ts.items())


@dataclass(frozen=True)
class TimeTickUpdate:
    """What one ``updateTimeTick`` call did (Go returns only nil, so the simulator reads this instead).

    ``ignored`` is :data:`IGNORED_EMPTY` or :data:`IGNORED_GO_BACK` when the report was dropped
    without error; otherwise ``cnt`` is the source's report count since the last round, ``sent`` says
    whether the gate opened, and ``dropped`` that it opened but the one-slot channel was still full.
    """

    ignored: str | None = None
    cnt: int = 0
    sent: bool = False
    dropped: bool = False


class TimetickSync:
    """``timetickSync``: the per-source report map, the gate, the one-slot channel and the histogram.

    ``sess2_chan_ts_map`` maps a source id to its latest report, or ``None`` when it has not reported
    since the last round. It is public because Milvus's own tests set entries directly; other code
    should change it only through the methods.
    """

    def __init__(self, source_id: int):
        self.source_id = source_id
        self.sess2_chan_ts_map: dict[int, ChanTsMsg | None] = {}
        self._pending: dict[int, ChanTsMsg] | None = None
        self.synced_tt_histogram = TtHistogram()
        self._snapshots_sent = 0
        self._snapshots_dropped = 0
        self._gate_failures = 0

    @property
    def snapshots_sent(self) -> int:
        """Snapshots put into the empty slot so far."""
        return self._snapshots_sent

    @property
    def snapshots_dropped(self) -> int:
        """Rounds whose snapshot was dropped because the slot was still full (quirk 5)."""
        return self._snapshots_dropped

    @property
    def gate_failures(self) -> int:
        """Calls of :meth:`send_to_channel` that returned False (empty map or a silent source)."""
        return self._gate_failures

    # ---- sessions -------------------------------------------------------------------------------
    def init_sessions(self, proxy_ids: Iterable[int]) -> None:
        """``initSessions``: forget everything; the DDL source and every proxy found at start owe a report."""
        self.sess2_chan_ts_map = {DDL_SOURCE_ID: None}
        for server_id in proxy_ids:
            self.sess2_chan_ts_map[server_id] = None

    def add_session(self, server_id: int) -> None:
        """``addSession``: a new proxy owes a report, so the gate waits for it.

        Re-adding a known id also resets it to ``None``, discarding a report it already made this round.
        """
        self.sess2_chan_ts_map[server_id] = None

    def del_session(self, server_id: int) -> bool | None:
        """``delSession``: forget a departed proxy, then try the gate (it may have been the last one owing).

        Returns ``None`` for an unknown id (nothing happens), else what :meth:`send_to_channel` returned.
        """
        if server_id not in self.sess2_chan_ts_map:
            return None
        del self.sess2_chan_ts_map[server_id]
        return self.send_to_channel()

    def get_session_num(self) -> int:
        """``getSessionNum``: how many sources the gate waits for, the DDL source included."""
        return len(self.sess2_chan_ts_map)

    def idle_sessions(self) -> list[int]:
        """The sources that have not reported since the last round (what the idle warning lists), sorted."""
        return sorted(sid for sid, report in self.sess2_chan_ts_map.items() if report is None)

    # ---- reports and the gate -------------------------------------------------------------------
    def update_time_tick(self, msg: ChannelTimeTickMsg, reason: str) -> TimeTickUpdate:
        """``updateTimeTick``: validate one report, store it, and try the gate.

        ``reason`` says who calls (``"gRPC"`` for a proxy, ``"timetick loop"`` for the DDL source); Go
        only logs it. Raises :class:`UpdateTimeTickError` with Milvus's text for a malformed report or
        an unknown source.
        """
        if len(msg.channel_names) == 0 and msg.default_timestamp == 0:
            return TimeTickUpdate(ignored=IGNORED_EMPTY)
        if len(msg.timestamps) != len(msg.channel_names):
            raise UpdateTimeTickError("invalid TimeTickMsg, timestamp and channelname size mismatch")
        source = msg.base.source_id
        if source not in self.sess2_chan_ts_map:
            raise UpdateTimeTickError(f"skip ChannelTimeTickMsg from un-recognized session {source}")
        prev = self.sess2_chan_ts_map[source]
        # Only rootcoord's own server id is guarded; in standalone mode every component shares one
        # id, so there it guards the proxy's reports, while the DDL source (-1) is never guarded.
        if source == self.source_id and prev is not None and msg.default_timestamp < prev.default_ts:
            return TimeTickUpdate(ignored=IGNORED_GO_BACK)
        cnt = 1 if prev is None else prev.cnt + 1
        self.sess2_chan_ts_map[source] = ChanTsMsg.from_msg(msg, cnt)
        dropped_before = self.snapshots_dropped
        sent = self.send_to_channel()
        return TimeTickUpdate(cnt=cnt, sent=sent, dropped=self.snapshots_dropped > dropped_before)

    def send_to_channel(self) -> bool:
        """``sendToChannel``: if every source has reported, hand a copy over and reset every entry.

        False for an empty map or while some source is ``None``. The copy goes into the one-slot
        :attr:`pending`; if the slot is still full the copy is dropped, but the entries are reset
        anyway (quirk 5), so that round's reports are lost and every source must report again.
        """
        if not self.sess2_chan_ts_map or any(r is None for r in self.sess2_chan_ts_map.values()):
            self._gate_failures += 1
            return False
        snapshot = dict(self.sess2_chan_ts_map)
        for sid in self.sess2_chan_ts_map:
            self.sess2_chan_ts_map[sid] = None
        if self._pending is None:
            self._pending = snapshot
            self._snapshots_sent += 1
        else:
            # Go's comment: the consumer can only use the newest tick, and a queued older one would
            # hold back the next window, so the newer snapshot is simply not sent.
            self._snapshots_dropped += 1
        return True

    @property
    def pending(self) -> Snapshot | None:
        """The snapshot waiting in ``sendChan`` (read-only view), or ``None`` when the slot is empty."""
        return None if self._pending is None else MappingProxyType(self._pending)

    # ---- startWatch -----------------------------------------------------------------------------
    def watch_round(self) -> list[tuple[str, int]] | None:
        """One iteration of ``startWatch``: take the pending snapshot, return the ticks to broadcast.

        ``None`` when the slot is empty (the goroutine would still be waiting). Otherwise the slot is
        emptied and, for every channel the DDL source listed (in the order it listed them), the tick
        is the minimum of the DDL source's value and every source's :meth:`ChanTsMsg.get_timetick`.
        Go takes a plain minimum seeded with the DDL value here, not :func:`min_time_tick`: the two
        differ only when some value is 0 (a 0 wins here, but resets ``minTimeTick``), and no source
        sends 0 in practice (the DDL loop skips 0, a proxy lists only channels above 0).
        An empty list when the DDL source listed no channel. The caller broadcasts each tick as
        ``sendTimeTickToChannel`` does (one ``TimeTickMsg`` with BeginTs = EndTs = the tick, stamped
        with :attr:`source_id`) and, on success, calls :meth:`on_time_tick_sent`.
        """
        if self._pending is None:
            return None
        snapshot, self._pending = self._pending, None
        # Go dereferences a missing DDL entry and panics; it cannot be missing once initSessions ran.
        local = snapshot.get(DDL_SOURCE_ID)
        if local is None:
            return []
        ticks = []
        for channel, ts in local.chan_ts_map.items():
            mints = ts
            for report in snapshot.values():
                mints = min(mints, report.get_timetick(channel))
            ticks.append((channel, mints))
        return ticks

    def on_time_tick_sent(self, channel: str, ts: int) -> None:
        """The success branch of ``startWatch``'s per-channel goroutine: ``syncedTtHistogram.update``."""
        self.synced_tt_histogram.update(channel, ts)

    def get_synced_time_tick(self, channel: str) -> int:
        """``getSyncedTimeTick``: the last tick broadcast to the channel (0 if none)."""
        return self.synced_tt_histogram.get(channel)


def min_time_tick(*tts: int) -> int:
    """``minTimeTick``: a running minimum where a running value of 0 means "unset".

    A leading 0 is skipped (``min_time_tick(0, 5) == 5``); a later 0 is smaller than anything, so
    it wins if it comes last (``min_time_tick(5, 0) == 0``) but otherwise makes the running value
    unset again, and the next value replaces it (``min_time_tick(5, 0, 7) == 7``). Milvus 2.5
    defines it but ``startWatch`` does not call it.
    """
    ret = ZERO_TIMESTAMP
    for t in tts:
        if ret == 0 or t < ret:
            ret = t
    return ret


# ---- Core methods of root_coord.go, written as functions -----------------------------------------


@dataclass(frozen=True)
class Status:
    """``commonpb.Status`` as ``merr.Status`` fills it: ``code`` 0 and an empty reason mean success."""

    code: int = CODE_SUCCESS
    reason: str = ""

    @property
    def ok(self) -> bool:
        """True for success."""
        return self.code == CODE_SUCCESS


def update_channel_time_tick(
    healthy: bool, tt_sync: TimetickSync, msg: ChannelTimeTickMsg, *, state: str = "Abnormal"
) -> Status:
    """``Core.UpdateChannelTimeTick``: the RPC a proxy calls; errors come back as a status, never raised.

    ``state`` is rootcoord's state code, used only in the not-ready text (``Initializing``,
    ``Abnormal``, ``StandBy``, ...). A malformed report or an unknown source gives code 65535 with
    the text :meth:`TimetickSync.update_time_tick` raised.
    """
    if not healthy:
        return Status(CODE_SERVICE_NOT_READY, f"service not ready[rootcoord={tt_sync.source_id}]: {state}")
    if msg.base.msg_type != MsgType.TIME_TICK:
        return Status(
            CODE_PARAMETER_INVALID,
            f"invalid message type: invalid parameter[expected={MsgType.TIME_TICK}][actual={msg.base.msg_type}]",
        )
    try:
        tt_sync.update_time_tick(msg, "gRPC")
    except UpdateTimeTickError as exc:
        return Status(CODE_UNEXPECTED, str(exc))
    return Status()


def send_time_tick(tt_sync: TimetickSync, ts: int, dml_channels: Iterable[str], reason: str) -> TimeTickUpdate:
    """``Core.sendTimeTick``: report ``ts`` for every DML channel (and as default) as the DDL source.

    ``dml_channels`` is what ``chanTimeTick.listDmlChannels()`` returns; the tick round later visits
    channels in this order. Raises :class:`UpdateTimeTickError` as ``updateTimeTick`` does.
    """
    channels = tuple(dml_channels)
    msg = ChannelTimeTickMsg(
        base=MsgBase(MsgType.TIME_TICK, timestamp=ts, source_id=DDL_SOURCE_ID),
        channel_names=channels,
        timestamps=(ts,) * len(channels),
        default_timestamp=ts,
    )
    return tt_sync.update_time_tick(msg, reason)


@dataclass(frozen=True)
class MinDdlTsTick:
    """What one ``sendMinDdlTsAsTt`` call did.

    ``skipped`` is one of :data:`SKIP_DISABLED`, :data:`SKIP_UNHEALTHY`, :data:`SKIP_STARTING`,
    :data:`SKIP_ABNORMAL`, or ``None`` when ``sent_ts`` was reported; ``update`` is the report's
    outcome and ``error`` the text of a failed report (Go only logs it).
    """

    skipped: str | None = None
    min_bg_ddl_ts: int = 0
    min_normal_ddl_ts: int = 0
    sent_ts: int | None = None
    update: TimeTickUpdate | None = None
    error: str | None = None


def send_min_ddl_ts_as_tt(
    tt_sync: TimetickSync,
    all_dml_channels: Iterable[str],
    ddl_lock_mgr,
    scheduler,
    healthy: bool,
    tt_msg_enabled: bool,
) -> MinDdlTsTick:
    """``Core.sendMinDdlTsAsTt``: one tick of ``startTimeTickLoop`` (every ``proxy.timeTickInterval``).

    Reports ``min(ddl_lock_mgr.get_min_ddl_ts(), scheduler.get_min_ddl_ts())`` as the DDL source's
    tick for every DML channel. The lock manager is asked first and may allocate a timestamp, so it
    is not asked at all when the loop is disabled or rootcoord is not healthy.
    """
    if not tt_msg_enabled:
        return MinDdlTsTick(skipped=SKIP_DISABLED)
    if not healthy:
        return MinDdlTsTick(skipped=SKIP_UNHEALTHY)
    min_bg = ddl_lock_mgr.get_min_ddl_ts()
    min_normal = scheduler.get_min_ddl_ts()
    min_ddl_ts = min(min_bg, min_normal)
    if min_ddl_ts == ZERO_TIMESTAMP:
        return MinDdlTsTick(skipped=SKIP_STARTING, min_bg_ddl_ts=min_bg, min_normal_ddl_ts=min_normal)
    if min_ddl_ts == MAX_TIMESTAMP:
        return MinDdlTsTick(skipped=SKIP_ABNORMAL, min_bg_ddl_ts=min_bg, min_normal_ddl_ts=min_normal)
    try:
        update = send_time_tick(tt_sync, min_ddl_ts, all_dml_channels, "timetick loop")
    except UpdateTimeTickError as exc:
        return MinDdlTsTick(min_bg_ddl_ts=min_bg, min_normal_ddl_ts=min_normal, error=str(exc))
    return MinDdlTsTick(min_bg_ddl_ts=min_bg, min_normal_ddl_ts=min_normal, sent_ts=min_ddl_ts, update=update)
