"""The DataNode's channel checkpoint updater (reference §4.5, quirk 8).

Ports Milvus 2.5 ``internal/flushcommon/util/checkpoint_updater_test.go`` (TestUpdate), pins each rule
of ``AddTask``, the notify path and ``updateCheckpoints`` one at a time, then checks with hypothesis
that, without the bug switch, the newest position of every channel reaches DataCoord once RPCs
succeed, and that with ``drop_failed_checkpoint_tasks`` a single failure can lose it.
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.cluster.data import DataNodeNode
from milvus_edu.sim.ticker import next_grid_tick
from milvus_edu.config import S, DataNodeParams
from milvus_edu.datanode.checkpoint_updater import (
    DEFAULT_UPDATE_CHAN_CP_MAX_PARALLEL,
    ChannelCheckpointUpdater,
    CheckpointTaskView,
    Parallel,
    UpdateChannelCheckpoints,
    UpdateOutcome,
    update_chan_cp_max_parallel,
)
from milvus_edu.effects import Sleep, drive
from milvus_edu.merr import ServiceNotReadyError
from milvus_edu.proto import MsgPosition


def pos(ch: str, ts: int, msg_id: int | None = 1) -> MsgPosition:
    return MsgPosition(ch, msg_id, ts)


class DataCoord:
    """DataCoord's ``UpdateChannelCheckpoints`` as the updater sees it: a checkpoint per channel that
    never goes back, and a switch to fail the next RPCs."""

    def __init__(self, fail_next: int = 0):
        self.cp: dict[str, int] = {}
        self.rpcs: list[tuple[MsgPosition, ...]] = []
        self.waves: list[int] = []
        self.fail_next = fail_next
        self.failed: list[MsgPosition] = []
        self.during_rpc = None

    def rpc(self, effect: UpdateChannelCheckpoints):
        self.rpcs.append(effect.positions)
        if self.during_rpc is not None:
            self.during_rpc()
        if self.fail_next > 0:
            self.fail_next -= 1
            self.failed.extend(effect.positions)
            raise ServiceNotReadyError()
        for p in effect.positions:
            if self.cp.get(p.channel_name, -1) < p.timestamp:
                self.cp[p.channel_name] = p.timestamp

    def __call__(self, effect):
        assert isinstance(effect, Parallel)
        self.waves.append(len(effect.effects))
        return effect.gather(self.rpc)


def small_params(per_rpc=128, parallel=10) -> DataNodeParams:
    return DataNodeParams(max_channel_checkpoints_per_rpc=per_rpc, update_channel_checkpoint_max_parallel=parallel)


# =================================================================================================
# Port of checkpoint_updater_test.go
# =================================================================================================


def test_duplicate_tasks_call_each_channel_callback_once():
    """Ports TestUpdate (2000 channels instead of 100000): ten same-ts tasks per channel, one callback each."""
    updater = ChannelCheckpointUpdater()
    counter = []
    for i in range(2000):
        for _ in range(10):
            updater.add_task(pos(f"ch-{i}", 100), False, lambda i=i: counter.append(i))
    assert updater.task_num() == 2000
    datacoord = DataCoord()
    outcome = drive(updater.execute(), datacoord)
    assert len(counter) == 2000 and len(set(counter)) == 2000
    assert updater.task_num() == 0
    assert outcome.rpcs == 16 and datacoord.waves == [10, 6]  # ceil(2000/128) groups, 10 at a time


# =================================================================================================
# AddTask
# =================================================================================================


@pytest.mark.parametrize("bad", [None, pos("ch", 5, msg_id=None), pos("", 5)])
def test_illegal_positions_are_ignored(bad):
    """No position, no msg id or no channel: warned and dropped, even a flush (no trigger)."""
    updater = ChannelCheckpointUpdater()
    assert updater.add_task(bad, True, lambda: None) is False
    assert updater.task_num() == 0 and not updater.notify_pending


def test_a_newer_position_replaces_the_task_and_its_callback():
    """A later timestamp replaces the pending task (position and callback)."""
    updater = ChannelCheckpointUpdater()
    called = []
    updater.add_task(pos("ch", 5), False, lambda: called.append("old"))
    updater.add_task(pos("ch", 6), False, lambda: called.append("new"))
    assert updater.tasks == (CheckpointTaskView("ch", pos("ch", 6), False),)
    drive(updater.execute(), DataCoord())
    assert called == ["new"]


@pytest.mark.parametrize("ts", [4, 5])
def test_an_older_or_equal_position_without_flush_is_ignored(ts):
    """Same or older timestamp and no new flush: ignored, its callback never runs."""
    updater = ChannelCheckpointUpdater()
    called = []
    updater.add_task(pos("ch", 5), False, lambda: called.append("kept"))
    updater.add_task(pos("ch", ts, msg_id=9), False, lambda: called.append("ignored"))
    assert updater.tasks[0].position == pos("ch", 5)
    drive(updater.execute(), DataCoord())
    assert called == ["kept"]


def test_a_flush_on_an_older_position_keeps_the_newer_position_but_takes_the_new_callback():
    """Quirk 8: the merged task keeps the max position and the *newest* callback (carrying an older ts)."""
    updater = ChannelCheckpointUpdater()
    called = []
    updater.add_task(pos("ch", 9), False, lambda: called.append(9))
    assert updater.add_task(pos("ch", 7), True, lambda: called.append(7)) is True
    assert updater.tasks == (CheckpointTaskView("ch", pos("ch", 9), True),)
    drive(updater.execute(), DataCoord())
    assert called == [7]


def test_a_tie_keeps_the_pending_position_object():
    """On equal timestamps ``max`` returns the pending position (a flush merge on a tie)."""
    updater = ChannelCheckpointUpdater()
    first, second = pos("ch", 5, msg_id=1), pos("ch", 5, msg_id=2)
    updater.add_task(first, False, lambda: None)
    updater.add_task(second, True, lambda: None)
    assert updater.tasks[0].position is first and updater.tasks[0].flush


def test_a_flush_task_already_flagged_is_ignored_but_still_triggers():
    """A second flush at the same position changes nothing, yet the notify path is triggered again."""
    updater = ChannelCheckpointUpdater()
    called = []
    updater.add_task(pos("ch", 5), True, lambda: called.append("first"))
    updater.take_flush_tasks()
    updater.add_task(pos("ch", 5), False, lambda: None)
    updater.add_task(pos("ch", 5), True, lambda: called.append("flush"))
    assert updater.notify_pending and updater.tasks[0].flush
    drive(updater.execute(), DataCoord())
    assert called == ["flush"]
    updater.add_task(pos("ch", 6), True, lambda: called.append("a"))
    updater.add_task(pos("ch", 6), True, lambda: called.append("b"))
    assert updater.add_task(pos("ch", 6), True, lambda: None) is True
    drive(updater.execute(), DataCoord())
    assert called[-1] == "a"


# =================================================================================================
# The notify path and updateCheckpoints
# =================================================================================================


def test_notify_path_sends_only_flush_tasks_and_clears_their_flag_first():
    """``take_flush_tasks`` consumes the notification and clears ``flush`` on the tasks it returns."""
    updater = ChannelCheckpointUpdater()
    updater.add_task(pos("a", 1), False, lambda: None)
    assert updater.add_task(pos("b", 2), True, lambda: None) is True
    assert updater.notify_pending
    tasks = updater.take_flush_tasks()
    assert [t.pos.channel_name for t in tasks] == ["b"] and not updater.notify_pending
    assert [v.flush for v in updater.tasks] == [False, False]
    datacoord = DataCoord()
    drive(updater.update_checkpoints(tasks), datacoord)
    assert datacoord.cp == {"b": 2} and [v.channel for v in updater.tasks] == ["a"]


def test_a_failed_flush_update_stays_without_its_flag_until_the_tick():
    """The flag is cleared before the RPC: a failure leaves a plain task, only the tick resends it."""
    updater = ChannelCheckpointUpdater()
    called = []
    updater.add_task(pos("b", 2), True, lambda: called.append("b"))
    outcome = drive(updater.update_checkpoints(updater.take_flush_tasks()), DataCoord(fail_next=1))
    assert outcome.failed == (pos("b", 2),) and outcome.deleted == () and called == []
    assert updater.take_flush_tasks() == []
    datacoord = DataCoord()
    drive(updater.execute(), datacoord)
    assert datacoord.cp == {"b": 2} and called == ["b"] and updater.task_num() == 0


def test_groups_and_waves_follow_the_parameters():
    """Five tasks, two per RPC, two RPCs at once: waves of [2, 1] RPCs with the 20 s timeout."""
    updater = ChannelCheckpointUpdater(small_params(per_rpc=2, parallel=2))
    for i in range(5):
        updater.add_task(pos(f"ch{i}", i + 1), False, lambda: None)
    effects = []

    def handle(effect):
        effects.append(effect)
        return [None] * len(effect.effects)

    outcome = drive(updater.execute(), handle)
    assert [len(e.effects) for e in effects] == [2, 1]
    assert [[p.channel_name for p in u.positions] for e in effects for u in e.effects] == [
        ["ch0", "ch1"], ["ch2", "ch3"], ["ch4"]]
    assert {u.timeout_ns for e in effects for u in e.effects} == {20 * S}
    assert outcome.rpcs == 3 and len(outcome.sent) == 5


def test_max_parallel_not_positive_means_ten():
    """``updateChannelCheckpointMaxParallel <= 0`` falls back to 10."""
    assert update_chan_cp_max_parallel(0) == update_chan_cp_max_parallel(-3) == 10
    assert DEFAULT_UPDATE_CHAN_CP_MAX_PARALLEL == 10
    assert update_chan_cp_max_parallel(4) == 4


def test_a_failed_group_keeps_its_tasks_and_other_groups_succeed():
    """Only the failed RPC's tasks stay; callbacks run for the succeeded group only."""
    updater = ChannelCheckpointUpdater(small_params(per_rpc=1))
    called = []
    for ch in ("a", "b"):
        updater.add_task(pos(ch, 5), False, lambda ch=ch: called.append(ch))
    outcome = drive(updater.execute(), DataCoord(fail_next=1))
    assert outcome.failed == (pos("a", 5),) and outcome.sent == (pos("b", 5),)
    assert called == ["b"] and [v.channel for v in updater.tasks] == ["a"]


def test_a_newer_task_added_during_the_rpc_survives_the_deletion():
    """Deletion keeps a task whose position became newer while the RPC was in flight; an equal one goes."""
    updater = ChannelCheckpointUpdater()
    updater.add_task(pos("ch", 5), False, lambda: None)
    updater.add_task(pos("eq", 5), False, lambda: None)
    datacoord = DataCoord()

    def add_during_rpc():
        updater.add_task(pos("ch", 8), False, lambda: None)
        updater.add_task(pos("eq", 5), True, lambda: None)

    datacoord.during_rpc = add_during_rpc
    outcome = drive(updater.execute(), datacoord)
    assert outcome.deleted == ("eq",)
    assert updater.tasks == (CheckpointTaskView("ch", pos("ch", 8), False),)


def test_update_checkpoints_runs_one_at_a_time():
    """Go's single loop goroutine never overlaps two updates; the model refuses it loudly."""
    updater = ChannelCheckpointUpdater()
    updater.add_task(pos("ch", 1), False, lambda: None)
    first = updater.execute()
    next(first)
    with pytest.raises(RuntimeError, match="one update at a time"):
        next(updater.execute())
    first.close()
    assert drive(updater.execute(), DataCoord()).deleted == ("ch",)


def test_switch_drops_a_failed_update():
    """``drop_failed_checkpoint_tasks``: the failed task is deleted without its callback; nothing resends it."""
    updater = ChannelCheckpointUpdater(drop_failed_checkpoint_tasks=True)
    called = []
    updater.add_task(pos("ch", 5), True, lambda: called.append(5))
    datacoord = DataCoord(fail_next=1)
    outcome = drive(updater.execute(), datacoord)
    assert outcome.deleted == ("ch",) and updater.task_num() == 0
    drive(updater.execute(), datacoord)
    assert datacoord.cp == {} and called == []


# =================================================================================================
# Properties
# =================================================================================================

channels = st.sampled_from(["a", "b", "c"])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), channels, st.integers(1, 50), st.booleans()),
        st.tuples(st.just("tick"), st.integers(0, 3), st.none() | st.tuples(channels, st.integers(1, 50))),
        st.tuples(st.just("notify"), st.integers(0, 3), st.none() | st.tuples(channels, st.integers(1, 50))),
    ),
    max_size=30,
)


def _play(script, switch: bool, per_rpc: int = 2):
    """Run ``script`` (adds, ticks and notifies with some failing RPCs), then tick with healthy RPCs."""
    updater = ChannelCheckpointUpdater(small_params(per_rpc=per_rpc, parallel=1),
                                       drop_failed_checkpoint_tasks=switch)
    datacoord = DataCoord()
    newest: dict[str, int] = {}
    notified: dict[str, list[int]] = {}

    def add(ch, ts, flush):
        newest[ch] = max(newest.get(ch, 0), ts)
        updater.add_task(pos(ch, ts), flush, lambda: notified.setdefault(ch, []).append(ts))

    for op in script:
        if op[0] == "add":
            add(*op[1:])
        else:
            kind, datacoord.fail_next, during = op
            datacoord.during_rpc = (lambda: add(*during, False)) if during else None
            steps = updater.execute() if kind == "tick" else updater.update_checkpoints(updater.take_flush_tasks())
            drive(steps, datacoord)
    datacoord.fail_next, datacoord.during_rpc = 0, None
    for _ in range(3):
        drive(updater.execute(), datacoord)
    return updater, datacoord, newest, notified


@settings(max_examples=200, deadline=None)
@given(ops)
def test_newest_position_of_every_channel_is_eventually_stored(script):
    """Property (no switch): whatever RPCs failed, once they succeed DataCoord holds every channel's
    newest position, no task is left, and every callback ran after a successful RPC of its channel."""
    updater, datacoord, newest, notified = _play(script, switch=False)
    assert datacoord.cp == newest
    assert updater.task_num() == 0
    for ch, seen in notified.items():
        assert all(ts <= datacoord.cp[ch] for ts in seen)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_with_the_switch_a_lost_position_was_always_a_failed_one(script):
    """Property (switch on): a channel whose newest position DataCoord lacks had an RPC of it fail,
    and nothing is left to resend it."""
    updater, datacoord, newest, _ = _play(script, switch=True)
    assert updater.task_num() == 0
    for ch, ts in newest.items():
        assert datacoord.cp.get(ch, 0) <= ts
        if datacoord.cp.get(ch) != ts:
            assert any(p.channel_name == ch for p in datacoord.failed)


def test_with_the_switch_a_failure_can_lose_the_newest_position():
    """Hypothesis finds a script where, with the switch, DataCoord never receives a channel's newest
    position; the same script without the switch stores it."""
    script = find(ops, lambda s: _play(s, switch=True)[1].cp != _play(s, switch=True)[2],
                  settings=settings(max_examples=500, database=None))
    _, datacoord, newest, _ = _play(script, switch=False)
    assert datacoord.cp == newest


# =================================================================================================
# The updater's loop in the simulated DataNode (Go's ``Start``: a ``time.Ticker``)
# =================================================================================================

def test_next_grid_tick_follows_the_ticker_grid_and_drops_missed_ticks():
    assert next_grid_tick(10.0, 10.0, 10.0) == 20.0  # taken on time
    assert next_grid_tick(10.0, 10.0, 35.0) == 40.0  # 20 was held, 30 dropped: next is the grid's 40
    assert next_grid_tick(10.0, 10.0, 40.0) == 50.0  # a tick falling due at the very instant is the one taken
    with pytest.raises(ValueError, match="period must be positive"):
        next_grid_tick(10.0, 0.0, 10.0)


def test_a_slow_tick_round_is_followed_by_one_round_not_one_per_missed_tick(monkeypatch):
    """Go's ticker holds one missed tick and drops the rest: after a round that took 25 s of a 10 s period, the
    loop runs one round at once and then keeps to the grid (the model used to run a round per missed tick)."""
    nodes: list[DataNodeNode] = []
    calls: list[float] = []
    start = DataNodeNode.start

    def recording_start(self, channels):
        nodes.append(self)
        start(self, channels)

    def execute(self):
        calls.append(nodes[0].sim.env.now)
        if len(calls) == 1:
            yield Sleep(25 * S)
        return UpdateOutcome((), (), (), 0)

    monkeypatch.setattr(DataNodeNode, "start", recording_start)
    monkeypatch.setattr(ChannelCheckpointUpdater, "execute", execute)
    milvus_edu.simulate("flush-basics", seed=1, duration_s=52,
                        options={"inserts_per_s": 5.0, "deletes_per_s": 0.0, "workload_s": 2.0})
    first = calls[0]
    assert [round((t - first) / 1000, 3) for t in calls] == [0, 25, 30, 40]  # env.now is in ms
