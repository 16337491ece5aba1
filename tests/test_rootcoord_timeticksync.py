"""RootCoord's time-tick sync: the report map, the gate, the one-slot channel, the round (reference §2.5).

The first part ports Milvus 2.5 ``internal/rootcoord/timeticksync_test.go``; the second pins each rule
of ``timeticksync.go`` and of the ``UpdateChannelTimeTick`` RPC; the last is a hypothesis state
machine that interleaves proxy reports, DDL reports, sessions coming and going, and tick rounds.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from milvus_edu.proto import ChannelTimeTickMsg, MsgBase, MsgType
from milvus_edu.rootcoord import (
    DDL_SOURCE_ID,
    ChanTsMsg,
    TimetickSync,
    TtHistogram,
    UpdateTimeTickError,
    min_time_tick,
    send_time_tick,
    update_channel_time_tick,
)
from milvus_edu.rootcoord.timeticksync import (
    CODE_PARAMETER_INVALID,
    CODE_SERVICE_NOT_READY,
    CODE_UNEXPECTED,
    IGNORED_EMPTY,
    IGNORED_GO_BACK,
)

ROOTCOORD_ID = 100
CHANNELS = ("by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1", "by-dev-rootcoord-dml_2")


def report(source: int, default: int = 0, channels=(), timestamps=None, msg_type: str = MsgType.TIME_TICK):
    """A ChannelTimeTickMsg as a proxy sends it (``timestamps`` defaults to one per channel, all ``default``)."""
    channels = tuple(channels)
    if timestamps is None:
        timestamps = (default,) * len(channels)
    return ChannelTimeTickMsg(MsgBase(msg_type, source_id=source), channels, tuple(timestamps), default)


def synced(*proxy_ids: int, source_id: int = ROOTCOORD_ID) -> TimetickSync:
    tt = TimetickSync(source_id)
    tt.init_sessions(proxy_ids)
    return tt


# =================================================================================================
# Port of timeticksync_test.go
# =================================================================================================

def test_send_to_channel_needs_a_report_from_every_session():
    """Ports ``TestTimetickSync/sendToChannel`` (and the identical first half of
    ``TestTimetickSyncWithExistChannels``)."""
    tt = TimetickSync(ROOTCOORD_ID)
    assert tt.send_to_channel() is False  # no session at all

    tt.sess2_chan_ts_map[1] = None
    assert tt.send_to_channel() is False  # session 1 has not reported

    tt.sess2_chan_ts_map[1] = ChanTsMsg.from_msg(report(0), 1)
    assert tt.send_to_channel() is True
    assert tt.sess2_chan_ts_map == {1: None}
    assert tt.pending[1].default_ts == 0


def test_update_time_tick_ignores_empty_rejects_mismatch_and_accepts_own_source():
    """Ports ``TestTimetickSync/UpdateTimeTick``."""
    tt = TimetickSync(ROOTCOORD_ID)
    tt.sess2_chan_ts_map[1] = None  # left by the sendToChannel subtest

    assert tt.update_time_tick(report(1, default=0), "1").ignored == IGNORED_EMPTY

    with pytest.raises(UpdateTimeTickError, match="^invalid TimeTickMsg, timestamp and channelname size mismatch$"):
        tt.update_time_tick(report(1, channels=["a"], timestamps=[]), "1")

    msg = report(1, default=200, channels=["a"], timestamps=[2])
    tt.sess2_chan_ts_map[1] = ChanTsMsg.from_msg(msg, 1)
    out = tt.update_time_tick(msg, "1")
    assert (out.ignored, out.cnt, out.sent) == (None, 2, True)

    tt.source_id = 1
    out = tt.update_time_tick(msg, "1")
    assert out.ignored is None and out.cnt == 1  # the round reset the entry, so no go-back check


def test_min_time_tick_of_five_and_three_is_three():
    """Ports ``TestTimetickSync/minTimeTick``."""
    assert min_time_tick(5, 3) == 3


def test_two_sessions_reporting_fill_the_channel_with_both_reports():
    """Ports ``TestMultiTimetickSync``."""
    tt = TimetickSync(0)
    tt.add_session(1)
    tt.add_session(2)
    assert tt.update_time_tick(report(1, default=100), "1").sent is False
    assert tt.update_time_tick(report(2, default=102), "2").sent is True
    assert len(tt.pending) == 2
    assert {sid: r.default_ts for sid, r in tt.pending.items()} == {1: 100, 2: 102}


def test_tt_histogram_get_update_remove():
    """Ports ``Test_ttHistogram_get``."""
    h = TtHistogram()
    assert h.get("not_exist") == 0
    h.update("ch1", 100)
    assert h.get("ch1") == 100
    h.update("ch2", 1000)
    assert h.get("ch2") == 1000
    h.remove("ch1", "ch2", "not_exist")
    assert h.get("ch1") == 0
    assert h.get("ch2") == 0


# =================================================================================================
# The rules of timeticksync.go
# =================================================================================================

def test_init_sessions_resets_the_map_to_the_ddl_source_and_the_proxies():
    tt = synced(7)
    tt.update_time_tick(report(7, default=5), "gRPC")
    tt.init_sessions([8, 9])
    assert tt.sess2_chan_ts_map == {DDL_SOURCE_ID: None, 8: None, 9: None}
    assert tt.get_session_num() == 3
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 8, 9]


def test_empty_report_is_a_no_op_even_from_an_unknown_source():
    tt = synced(1)
    assert tt.update_time_tick(report(42, default=0), "gRPC").ignored == IGNORED_EMPTY
    assert tt.sess2_chan_ts_map == {DDL_SOURCE_ID: None, 1: None}


def test_size_mismatch_is_checked_before_the_source():
    tt = synced(1)
    with pytest.raises(UpdateTimeTickError, match="size mismatch"):
        tt.update_time_tick(report(42, default=5, channels=["a", "b"], timestamps=[1]), "gRPC")


def test_unknown_source_is_rejected_with_its_id():
    tt = synced(1)
    with pytest.raises(UpdateTimeTickError, match="^skip ChannelTimeTickMsg from un-recognized session 42$"):
        tt.update_time_tick(report(42, default=5), "gRPC")


def test_zero_default_with_channels_is_accepted():
    tt = synced(1)
    out = tt.update_time_tick(report(1, default=0, channels=["a"], timestamps=[7]), "gRPC")
    assert out.ignored is None
    assert tt.sess2_chan_ts_map[1].get_timetick("a") == 7
    assert tt.sess2_chan_ts_map[1].get_timetick("b") == 0


def test_timestamp_go_back_is_ignored_only_for_rootcoords_own_server_id():
    # standalone mode: the proxy shares rootcoord's server id
    tt = synced(ROOTCOORD_ID, 2)
    tt.update_time_tick(report(ROOTCOORD_ID, default=50), "gRPC")
    out = tt.update_time_tick(report(ROOTCOORD_ID, default=40), "gRPC")
    assert out.ignored == IGNORED_GO_BACK
    assert tt.sess2_chan_ts_map[ROOTCOORD_ID].default_ts == 50
    assert tt.sess2_chan_ts_map[ROOTCOORD_ID].cnt == 1

    tt.update_time_tick(report(2, default=50), "gRPC")
    assert tt.update_time_tick(report(2, default=40), "gRPC").ignored is None
    assert tt.sess2_chan_ts_map[2].default_ts == 40

    tt.update_time_tick(report(DDL_SOURCE_ID, default=50), "timetick loop")
    assert tt.update_time_tick(report(DDL_SOURCE_ID, default=40), "timetick loop").ignored is None


def test_go_back_is_not_checked_against_a_report_already_sent_in_a_round():
    tt = synced(source_id=DDL_SOURCE_ID)
    assert tt.update_time_tick(report(DDL_SOURCE_ID, default=50), "timetick loop").sent is True
    assert tt.update_time_tick(report(DDL_SOURCE_ID, default=40), "timetick loop").ignored is None


def test_cnt_counts_reports_since_the_last_round():
    tt = synced(1)
    assert [tt.update_time_tick(report(1, default=t), "gRPC").cnt for t in (1, 2, 3)] == [1, 2, 3]
    assert tt.update_time_tick(report(DDL_SOURCE_ID, default=9), "timetick loop").sent is True
    assert tt.update_time_tick(report(1, default=4), "gRPC").cnt == 1


def test_gate_opens_only_when_every_session_reported_and_then_resets_all():
    tt = synced(1, 2)
    assert tt.update_time_tick(report(DDL_SOURCE_ID, default=9), "t").sent is False
    assert tt.update_time_tick(report(1, default=9), "gRPC").sent is False
    assert tt.idle_sessions() == [2]
    assert tt.gate_failures == 2
    assert tt.update_time_tick(report(2, default=9), "gRPC").sent is True
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 1, 2]
    assert tt.snapshots_sent == 1
    assert sorted(tt.pending) == [DDL_SOURCE_ID, 1, 2]


def test_full_slot_drops_the_new_snapshot_but_still_resets_every_entry():
    """Quirk 5: the reports of the dropped round are lost."""
    tt = synced(1)
    tt.update_time_tick(report(DDL_SOURCE_ID, default=10), "t")
    tt.update_time_tick(report(1, default=10), "gRPC")
    tt.update_time_tick(report(DDL_SOURCE_ID, default=20), "t")
    out = tt.update_time_tick(report(1, default=20), "gRPC")
    assert (out.sent, out.dropped) == (True, True)
    assert tt.snapshots_dropped == 1
    assert tt.pending[1].default_ts == 10  # the older snapshot stays
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 1]


def test_deleting_the_last_silent_session_opens_the_gate():
    tt = synced(1, 2)
    tt.update_time_tick(report(DDL_SOURCE_ID, default=9), "t")
    tt.update_time_tick(report(1, default=9), "gRPC")
    assert tt.del_session(2) is True
    assert sorted(tt.pending) == [DDL_SOURCE_ID, 1]


def test_deleting_an_unknown_session_does_nothing():
    tt = synced(1)
    assert tt.del_session(5) is None
    assert tt.gate_failures == 0
    assert tt.get_session_num() == 2


def test_deleting_a_session_while_another_is_silent_keeps_the_gate_closed():
    tt = synced(1, 2)
    tt.update_time_tick(report(DDL_SOURCE_ID, default=9), "t")
    assert tt.del_session(2) is False
    assert tt.idle_sessions() == [1]


def test_re_adding_a_session_discards_its_report_of_this_round():
    tt = synced(1)
    tt.update_time_tick(report(1, default=9), "gRPC")
    tt.add_session(1)
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 1]


def test_a_new_proxy_holds_the_gate_until_it_reports():
    tt = synced(1)
    tt.add_session(2)
    tt.update_time_tick(report(DDL_SOURCE_ID, default=9), "t")
    assert tt.update_time_tick(report(1, default=9), "gRPC").sent is False
    assert tt.update_time_tick(report(2, default=9), "gRPC").sent is True


def test_watch_round_is_none_while_the_slot_is_empty():
    assert synced(1).watch_round() is None


def test_watch_round_takes_the_min_per_ddl_channel_in_ddl_order():
    tt = synced(1, 2)
    send_time_tick(tt, 500, ["c2", "c0", "c1"], "timetick loop")
    tt.update_time_tick(report(1, default=450, channels=["c0"], timestamps=[300]), "gRPC")
    tt.update_time_tick(report(2, default=480, channels=["c1", "c9"], timestamps=[200, 1]), "gRPC")
    assert tt.watch_round() == [("c2", 450), ("c0", 300), ("c1", 200)]
    assert tt.pending is None
    assert tt.watch_round() is None


def test_watch_round_with_a_ddl_source_listing_no_channel_broadcasts_nothing():
    tt = synced()
    tt.update_time_tick(report(DDL_SOURCE_ID, default=5), "t")
    assert tt.watch_round() == []
    assert tt.pending is None


def test_watch_round_without_a_ddl_source_broadcasts_nothing():
    tt = TimetickSync(ROOTCOORD_ID)
    tt.add_session(1)
    tt.update_time_tick(report(1, default=5, channels=["a"], timestamps=[3]), "gRPC")
    assert tt.watch_round() == []


def test_a_zero_from_a_proxy_wins_the_round():
    tt = synced(1)
    send_time_tick(tt, 500, ["a"], "t")
    tt.update_time_tick(report(1, default=5, channels=["a"], timestamps=[0]), "gRPC")
    assert tt.watch_round() == [("a", 0)]


def test_successful_broadcast_is_remembered_per_channel():
    tt = synced()
    tt.on_time_tick_sent("a", 7)
    tt.on_time_tick_sent("a", 9)
    assert tt.get_synced_time_tick("a") == 9
    assert tt.get_synced_time_tick("b") == 0
    assert tt.synced_tt_histogram.items() == [("a", 9)]


def test_min_time_tick_treats_zero_as_unset_so_a_zero_resets_the_running_min():
    assert min_time_tick() == 0
    assert min_time_tick(0, 5, 7) == 5
    assert min_time_tick(5, 0) == 0  # a trailing 0 wins
    assert min_time_tick(5, 0, 7) == 7  # a 0 in the middle forgets the 5
    assert min_time_tick(0, 0, 4) == 4


def test_send_time_tick_reports_one_ts_for_every_dml_channel_as_the_ddl_source():
    tt = synced(1)
    out = send_time_tick(tt, 42, CHANNELS, "timetick loop")
    assert out.cnt == 1 and out.sent is False
    ddl = tt.sess2_chan_ts_map[DDL_SOURCE_ID]
    assert dict(ddl.chan_ts_map) == {ch: 42 for ch in CHANNELS}
    assert ddl.default_ts == 42


# =================================================================================================
# UpdateChannelTimeTick (root_coord.go)
# =================================================================================================

def test_rpc_rejects_when_rootcoord_is_not_healthy():
    tt = synced(1)
    status = update_channel_time_tick(False, tt, report(1, default=5), state="Initializing")
    assert status.code == CODE_SERVICE_NOT_READY
    assert status.reason == f"service not ready[rootcoord={ROOTCOORD_ID}]: Initializing"
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 1]


def test_rpc_rejects_a_message_that_is_not_a_time_tick():
    tt = synced(1)
    status = update_channel_time_tick(True, tt, report(1, default=5, msg_type=MsgType.INSERT))
    assert status.code == CODE_PARAMETER_INVALID
    assert status.reason == "invalid message type: invalid parameter[expected=TimeTick][actual=Insert]"
    assert tt.idle_sessions() == [DDL_SOURCE_ID, 1]


def test_rpc_returns_update_errors_as_a_status():
    status = update_channel_time_tick(True, synced(1), report(9, default=5))
    assert not status.ok
    assert status.code == CODE_UNEXPECTED
    assert status.reason == "skip ChannelTimeTickMsg from un-recognized session 9"


def test_rpc_stores_a_valid_report():
    tt = synced(1)
    assert update_channel_time_tick(True, tt, report(1, default=5)).ok
    assert tt.sess2_chan_ts_map[1].default_ts == 5


# =================================================================================================
# Properties
# =================================================================================================

def value_in(msg: ChannelTimeTickMsg, channel: str) -> int:
    """What a report says for a channel, computed from the message itself (not via ChanTsMsg)."""
    named = dict(zip(msg.channel_names, msg.timestamps))
    return named.get(channel, msg.default_timestamp)


class GateMachine(RuleBasedStateMachine):
    """Interleave reports, sessions coming and going, and rounds; keep an independent model of the gate.

    ``round`` holds the last report of each source since the last send; ``pending`` the reports
    of the snapshot the model expects in the slot.
    """

    @initialize(proxies=st.lists(st.integers(1, 6), unique=True, max_size=3))
    def start(self, proxies):
        self.tt = TimetickSync(ROOTCOORD_ID)
        self.tt.init_sessions(proxies)
        self.sessions = {DDL_SOURCE_ID, *proxies}
        self.round: dict[int, ChannelTimeTickMsg] = {}
        self.pending: dict[int, ChannelTimeTickMsg] | None = None
        self.next_id = 7

    def _after_gate(self, sent: bool, dropped: bool) -> None:
        reported_all = bool(self.sessions) and self.sessions <= set(self.round)
        # the gate never sends twice without every session reporting in between
        assert sent == reported_all
        if sent:
            if self.pending is None:
                assert not dropped
                self.pending = dict(self.round)
            else:
                assert dropped
            self.round = {}

    def _report(self, msg: ChannelTimeTickMsg, reason: str) -> None:
        out = self.tt.update_time_tick(msg, reason)
        if not msg.channel_names and msg.default_timestamp == 0:
            assert out.ignored == IGNORED_EMPTY
            return
        assert out.ignored is None
        self.round[msg.base.source_id] = msg
        self._after_gate(out.sent, out.dropped)

    @precondition(lambda self: len(self.sessions) > 1)
    @rule(data=st.data(), default=st.integers(0, 1000))
    def proxy_reports(self, data, default):
        proxy = data.draw(st.sampled_from(sorted(self.sessions - {DDL_SOURCE_ID})))
        named = data.draw(st.dictionaries(st.sampled_from(CHANNELS), st.integers(0, 1000), max_size=3))
        self._report(report(proxy, default, named.keys(), named.values()), "gRPC")

    @precondition(lambda self: DDL_SOURCE_ID in self.sessions)
    @rule(ts=st.integers(1, 1000))
    def ddl_reports(self, ts):
        self._report(report(DDL_SOURCE_ID, ts, CHANNELS), "timetick loop")

    @rule()
    def unknown_source_is_rejected(self):
        with pytest.raises(UpdateTimeTickError):
            self.tt.update_time_tick(report(-2, default=5), "gRPC")

    @rule(existing=st.booleans(), data=st.data())
    def add_session(self, existing, data):
        proxies = sorted(self.sessions - {DDL_SOURCE_ID})
        if existing and proxies:
            sid = data.draw(st.sampled_from(proxies))
        else:
            sid, self.next_id = self.next_id, self.next_id + 1
        self.tt.add_session(sid)
        self.sessions.add(sid)
        self.round.pop(sid, None)

    @precondition(lambda self: len(self.sessions) > 0)
    @rule(data=st.data())
    def del_session(self, data):
        sid = data.draw(st.sampled_from(sorted(self.sessions)))
        idle_before = set(self.tt.idle_sessions()) - {sid}
        dropped_before = self.tt.snapshots_dropped
        sent = self.tt.del_session(sid)
        self.sessions.discard(sid)
        self.round.pop(sid, None)
        # deleting a session never blocks the gate: it opens unless someone else is still silent
        assert sent == (bool(self.sessions) and not idle_before)
        self._after_gate(sent, self.tt.snapshots_dropped > dropped_before)

    @rule()
    def watch_round(self):
        ticks = self.tt.watch_round()
        if self.pending is None:
            assert ticks is None
            return
        ddl = self.pending.get(DDL_SOURCE_ID)
        expected_channels = list(ddl.channel_names) if ddl else []
        assert [ch for ch, _ in ticks] == expected_channels
        for channel, mints in ticks:
            values = [value_in(msg, channel) for msg in self.pending.values()]
            # a broadcast tick never exceeds any reporting session's value for that channel in that round
            assert all(mints <= v for v in values)
            assert mints in values
            self.tt.on_time_tick_sent(channel, mints)
            assert self.tt.get_synced_time_tick(channel) == mints
        self.pending = None

    @invariant()
    def idle_sessions_are_those_without_a_report(self):
        if hasattr(self, "tt"):
            assert self.tt.idle_sessions() == sorted(self.sessions - set(self.round))
            assert (self.tt.pending is None) == (self.pending is None)


@pytest.mark.slow
def test_gate_and_rounds_hold_their_promises_under_any_interleaving():
    run_state_machine_as_test(
        GateMachine,
        settings=settings(max_examples=300, stateful_step_count=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
