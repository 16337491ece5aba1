"""The timestamp oracle and GlobalTSOAllocator (reference §1.4-1.6).

The first half ports Milvus 2.5 ``internal/tso/global_allocator_test.go`` (which needs a real etcd)
and runs it against both KV engines. The second half pins the exact rules of ``internal/tso/tso.go``
one branch at a time. The clock is a manual one and no test really sleeps: every sleep GenerateTSO
asks for is recorded.
"""

from __future__ import annotations

import pytest

from milvus_edu.config import MS, S, BugSwitches, TSOParams
from milvus_edu.effects import Sleep
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.rootcoord import Core
from milvus_edu.storage.kv import FaultyKV, KVError, MemoryKV, RootedKV, SQLiteKV
from milvus_edu.tso import GlobalTSOAllocator, TSOError, drive_with_sleep
from milvus_edu.tsoutil import compose_ts, parse_hybrid_ts, physical_time
from milvus_edu.clock import ManualClock

T0 = 1_700_000_000_123_456_789  # not a whole millisecond on purpose
MAX_LOGICAL = 1 << 18
TSO_KEY = "by-dev/kv/gid/timestamp"




class SleepLog:
    """A fake ``sleep``: records the seconds asked for, optionally runs a hook."""

    def __init__(self, hook=None):
        self.calls: list[float] = []
        self.hook = hook

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.hook:
            self.hook(len(self.calls))


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"unexpected sleep of {seconds} s")


@pytest.fixture(params=["memory", "sqlite"])
def kv(request, tmp_path):
    if request.param == "memory":
        store = MemoryKV()
    else:
        store = SQLiteKV(tmp_path / "kv.db")
    yield store
    store.close()


def new_allocator(store, clock, **kw) -> GlobalTSOAllocator:
    # tsoutil.NewTSOKVBase(etcdCli, "/test/root/kv", "tsoTest") with key "timestamp"
    return GlobalTSOAllocator("timestamp", RootedKV(store, "test/root/kv/tsoTest"), clock, **kw)


def stored_window(store, key="test/root/kv/tsoTest/timestamp") -> int:
    data = store.load(key)
    assert len(data) == 8
    return int.from_bytes(data, "big")


def gen(a: GlobalTSOAllocator, count: int) -> int:
    return a.generate_tso(count, sleep=no_sleep)


def state(a: GlobalTSOAllocator) -> tuple[int, int]:
    return a.tso.tso.physical_ns, a.tso.tso.logical


# =================================================================================================
# Port of global_allocator_test.go, against MemoryKV and SQLiteKV
# =================================================================================================

def test_initialize_update_and_reinitialize_after_window_elapsed(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    assert state(a) == (T0, 0)
    assert a.get_last_saved_time() == T0 + 3 * S
    assert stored_window(kv) == T0 + 3 * S

    a.update_tso()  # clock has not moved, logical is 0: nothing to do
    assert state(a) == (T0, 0)

    clock.advance(3 * S)  # Go sleeps 3 s
    a.initialize()
    # now == saved window end, so the new start is one guard past it
    assert state(a) == (T0 + 3 * S + MS, 0)
    assert stored_window(kv) == T0 + 6 * S + MS


def test_generate_tso_successive_batches_differ_by_count_on_same_physical(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    a.update_tso()
    per_count = 100
    last_p, last_l = parse_hybrid_ts(gen(a, per_count))
    assert (last_p, last_l) == (T0 // MS, per_count)
    for _ in range(1000):
        p, lg = parse_hybrid_ts(gen(a, per_count))
        assert p == last_p  # the clock is frozen: every batch is on the same physical
        assert lg - last_l == per_count
        last_p, last_l = p, lg
    assert last_l == 1001 * per_count


def test_generate_tso2_without_limit_max_logic_count_10_ms_advances_physical_10_ms(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    a.update_tso()
    a.set_limit_max_logic(False)
    start = gen(a, MAX_LOGICAL)  # exactly one physical ms worth of logicals: carries into physical
    assert parse_hybrid_ts(start) == (T0 // MS + 1, 0)
    step = 10
    per_count = step << 18
    last_p, last_l = parse_hybrid_ts(start)
    for _ in range(1000):
        p, lg = parse_hybrid_ts(gen(a, per_count))
        assert lg == last_l
        assert p == last_p + step
        last_p = p
    assert last_p == T0 // MS + 1 + 10_000
    a.update_tso()  # logical > maxLogical/2 and no clock movement: physical + 1 ms
    assert state(a) == (T0 + MS, 0)


def test_set_tso_two_seconds_ahead_succeeds_then_update_alloc_reset(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    a.update_tso()
    ts = gen(a, 1)
    p, lg = parse_hybrid_ts(ts)
    target = compose_ts(p + 2000, lg)
    a.set_tso(target)
    nxt = (p + 2001) * MS
    assert state(a) == (nxt, 0)
    assert a.get_last_saved_time() == nxt + 3 * S
    assert stored_window(kv) == nxt + 3 * S
    assert gen(a, 1) == compose_ts(p + 2001, 1)

    a.update_tso()  # clock is behind physical now: no change
    assert state(a) == (nxt, 1)
    assert a.alloc(100, sleep=no_sleep) == compose_ts(p + 2001, 101)
    assert a.alloc_one(sleep=no_sleep) == compose_ts(p + 2001, 102)

    a.reset()  # back to the clock, KV untouched
    assert state(a) == (T0, 0)
    assert stored_window(kv) == nxt + 3 * S


def test_generate_tso_count_zero_is_rejected(kv):
    a = new_allocator(kv, ManualClock())
    a.initialize()
    with pytest.raises(TSOError, match="tso count should be positive"):
        gen(a, 0)
    with pytest.raises(TSOError, match="tso count should be positive"):
        a.alloc(0, sleep=no_sleep)
    assert state(a) == (T0, 0)


def test_set_tso_zero_and_max_uint64_are_rejected(kv):
    a = new_allocator(kv, ManualClock())
    a.initialize()
    with pytest.raises(ValueError, match="too small"):
        a.set_tso(0)
    # Go compares UnixNano() values, which wrap past 2262: MaxUint64's physical part (year 4199) is a negative
    # int64 of nanoseconds, so the target counts as behind the oracle
    with pytest.raises(ValueError, match="too small"):
        a.set_tso(2**64 - 1)
    assert state(a) == (T0, 0)
    assert stored_window(kv) == T0 + 3 * S


def test_alloc_max_uint32_fails_after_ten_50ms_sleeps(kv):
    a = new_allocator(kv, ManualClock())
    a.initialize()
    sleeps = SleepLog()
    with pytest.raises(TSOError, match="can not get timestamp"):
        a.alloc(2**32 - 1, sleep=sleeps)
    assert sleeps.calls == [0.05] * 10


def test_update_tso_follows_clock_after_160ms_and_500ms(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    a.update_tso()
    clock.advance(160 * MS)
    a.update_tso()
    assert state(a) == (T0 + 160 * MS, 0)
    clock.advance(500 * MS)
    a.update_tso()
    assert state(a) == (T0 + 660 * MS, 0)
    # still more than one guard below the window: not re-saved
    assert stored_window(kv) == T0 + 3 * S


def test_load_new_allocator_after_set_tso_starts_at_or_after_target(kv):
    clock = ManualClock()
    a = new_allocator(kv, clock)
    a.initialize()
    a.update_tso()
    p, lg = parse_hybrid_ts(gen(a, 1))
    target = compose_ts(p + 2000, lg)
    a.set_tso(target)

    b = new_allocator(kv, clock)  # same KV, same clock: a restart
    b.initialize()
    ts2 = gen(b, 1)
    assert ts2 >= target
    assert physical_time(ts2) >= p + 2000
    # exactly one guard past the saved window (p + 2001 ms + 3 s)
    assert state(b)[0] == (p + 2001) * MS + 3 * S + MS


# =================================================================================================
# SetTSO bounds (ResetUserTimestamp)
# =================================================================================================

@pytest.mark.parametrize(
    "ahead_ms, error",
    [
        (2, "too small"),  # next - physical = 3 ms - 0.456789 ms <= 3 ms
        (3, None),  # 3.543 ms > 3 guards
        (2999, None),  # 2999.543 ms < 3 s
        (3000, "too large"),  # 3000.543 ms >= 3 s
        (-5, "too small"),
    ],
)
def test_set_tso_accepts_only_more_than_3_guards_and_less_than_3s_ahead(ahead_ms, error):
    store = MemoryKV()
    a = new_allocator(store, ManualClock())
    a.initialize()
    a.generate_tso(7, sleep=no_sleep)
    target = compose_ts(T0 // MS + ahead_ms, 123)
    if error:
        with pytest.raises(ValueError, match=error):
            a.set_tso(target)
        assert state(a) == (T0, 7)
        assert stored_window(store) == T0 + 3 * S
    else:
        a.set_tso(target)
        nxt = (T0 // MS + ahead_ms + 1) * MS
        assert state(a) == (nxt, 0)
        assert stored_window(store) == nxt + 3 * S


def test_set_tso_compares_times_as_go_int64_nanoseconds_that_wrap():
    """``SubTimeByWallClock`` subtracts two ``UnixNano()`` values, each an int64 that wraps after 2262-04-11, and the
    difference wraps too. A target in 2262 is 236 years ahead (too large); one in 2381 wraps to a large negative
    number of nanoseconds, so it counts as behind the oracle (too small)."""
    a = new_allocator(MemoryKV(), ManualClock())
    a.initialize()
    last_ms = ((1 << 63) - 1) // MS  # the last whole millisecond an int64 of nanoseconds can hold
    with pytest.raises(ValueError, match="too large"):
        a.set_tso(compose_ts(last_ms - 1, 0))  # next = last_ms: still representable
    with pytest.raises(ValueError, match="too small"):
        a.set_tso(compose_ts(13_000_000_000_000, 0))  # year 2381: wraps to about -170 years
    assert state(a) == (T0, 0)


def test_set_tso_save_error_leaves_state_and_raises():
    fail = {"save": False}
    store = MemoryKV()
    faulty = FaultyKV(store, lambda op, key: fail[op] if op in fail else False)
    a = new_allocator(faulty, ManualClock())
    a.initialize()
    fail["save"] = True
    with pytest.raises(KVError):
        a.set_tso(compose_ts(T0 // MS + 1000, 0))
    assert state(a) == (T0, 0)
    assert a.get_last_saved_time() == T0 + 3 * S


# =================================================================================================
# UpdateTimestamp rules (§1.4), through Core so the key is the real one
# =================================================================================================

def make_core(clock, store=None, **kw) -> tuple[Core, MemoryKV]:
    store = store if store is not None else MemoryKV()
    core = Core(store, clock, **kw)
    core.init_tso_allocator()
    return core, store


def core_state(core: Core) -> tuple[int, int]:
    obj = core.tso_allocator.tso.tso
    return obj.physical_ns, obj.logical


def core_gen(core: Core, count: int) -> int:
    return core.tso_allocator.generate_tso(count, sleep=no_sleep)


def test_core_saves_window_at_by_dev_kv_gid_timestamp_as_big_endian_ns():
    core, store = make_core(ManualClock())
    assert store.load(TSO_KEY) == (T0 + 3 * S).to_bytes(8, "big")
    assert [k for k, _ in store.load_with_prefix("")] == [TSO_KEY]


def test_update_jet_lag_over_1ms_moves_physical_to_now_and_resets_logical():
    clock = ManualClock()
    core, _ = make_core(clock)
    core_gen(core, 5)
    before = core.tso_allocator.tso.tso
    clock.advance(MS + 1)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + MS + 1, 0)
    assert core.tso_allocator.tso.tso is not before
    assert core_gen(core, 1) == compose_ts((T0 + MS + 1) // MS, 1)


def test_update_jet_lag_exactly_1ms_with_low_logical_changes_nothing():
    clock = ManualClock()
    core, _ = make_core(clock)
    core_gen(core, 5)
    before = core.tso_allocator.tso.tso
    clock.advance(MS)
    assert core.ts_loop_tick()
    assert core.tso_allocator.tso.tso is before
    assert core_state(core) == (T0, 5)


def test_update_jet_lag_at_most_1ms_and_logical_over_half_steps_physical_by_1ms():
    clock = ManualClock()
    core, _ = make_core(clock)
    core_gen(core, MAX_LOGICAL // 2 + 1)
    clock.advance(MS // 2)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + MS, 0)  # prev.physical + 1 ms, not the clock


def test_update_logical_exactly_half_is_not_enough_to_step():
    clock = ManualClock()
    core, _ = make_core(clock)
    core_gen(core, MAX_LOGICAL // 2)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0, MAX_LOGICAL // 2)


def test_update_clock_going_backwards_never_lowers_physical():
    clock = ManualClock()
    core, _ = make_core(clock)
    clock.advance(-5 * S)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0, 0)
    core_gen(core, MAX_LOGICAL // 2 + 1)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + MS, 0)


def test_update_huge_forward_jump_follows_clock_and_resaves_window():
    clock = ManualClock()
    core, store = make_core(clock)
    clock.advance(10 * S)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + 10 * S, 0)
    assert store.load(TSO_KEY) == (T0 + 13 * S).to_bytes(8, "big")
    assert core.tso_allocator.get_last_saved_time() == T0 + 13 * S


def test_update_resaves_window_when_next_is_within_1ms_of_saved_end():
    clock = ManualClock()
    core, store = make_core(clock)
    window = T0 + 3 * S
    clock.t = window - MS  # lastSaved - next == 1 ms: <= guard
    assert core.ts_loop_tick()
    assert core_state(core) == (window - MS, 0)
    assert store.load(TSO_KEY) == (window - MS + 3 * S).to_bytes(8, "big")
    assert core.tso_allocator.get_last_saved_time() == window - MS + 3 * S


def test_update_does_not_resave_window_when_more_than_1ms_remains():
    clock = ManualClock()
    core, store = make_core(clock)
    window = T0 + 3 * S
    saves = []
    store.watch(TSO_KEY, lambda ev, key: saves.append(ev))
    clock.t = window - MS - 1  # lastSaved - next == 1 ms + 1 ns: > guard
    assert core.ts_loop_tick()
    assert core_state(core) == (window - MS - 1, 0)
    assert saves == []
    assert store.load(TSO_KEY) == window.to_bytes(8, "big")
    assert core.tso_allocator.get_last_saved_time() == window


def test_update_save_error_leaves_tso_and_last_saved_unchanged_and_raises():
    clock = ManualClock()
    fail = {"on": False}
    store = MemoryKV()
    faulty = FaultyKV(store, lambda op, key: fail["on"] and op == "save")
    core, _ = make_core(clock, faulty)
    core_gen(core, 9)
    before = core.tso_allocator.tso.tso
    fail["on"] = True
    clock.advance(3 * S)  # must re-save the window to move
    with pytest.raises(KVError):
        core.tso_allocator.update_tso()
    assert core.ts_loop_tick() is False  # tsLoop logs and continues
    assert core.tso_allocator.tso.tso is before
    assert core_state(core) == (T0, 9)
    assert core.tso_allocator.get_last_saved_time() == T0 + 3 * S
    assert store.load(TSO_KEY) == (T0 + 3 * S).to_bytes(8, "big")
    # allocation keeps working inside the old window
    assert core_gen(core, 1) == compose_ts(T0 // MS, 10)
    fail["on"] = False
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + 3 * S, 0)
    assert core.tso_allocator.get_last_saved_time() == T0 + 6 * S


def test_update_without_save_needed_succeeds_while_kv_is_down():
    clock = ManualClock()
    faulty = FaultyKV(MemoryKV(), lambda op, key: op == "save" and clock.t > T0)
    core, _ = make_core(clock, faulty)
    clock.advance(100 * MS)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + 100 * MS, 0)


def test_init_save_error_leaves_allocator_uninitialised_and_raises():
    clock = ManualClock()
    faulty = FaultyKV(MemoryKV(), lambda op, key: op == "save")
    a = new_allocator(faulty, clock)
    with pytest.raises(KVError):
        a.initialize()
    assert a.tso.tso is None
    assert a.get_last_saved_time() == 0
    core = Core(faulty, clock)
    with pytest.raises(KVError):
        core.init_tso_allocator()
    assert core.tso_allocator is None


# =================================================================================================
# InitTimestamp
# =================================================================================================

def test_init_with_saved_window_in_future_starts_one_guard_after_it():
    clock = ManualClock()
    store = MemoryKV()
    window = T0 + 10 * S  # left by a predecessor whose clock ran ahead
    store.save(TSO_KEY, window.to_bytes(8, "big"))
    core, _ = make_core(clock, store)
    assert core_state(core) == (window + MS, 0)
    assert store.load(TSO_KEY) == (window + MS + 3 * S).to_bytes(8, "big")
    assert core_gen(core, 1) == compose_ts((window + MS) // MS, 1)


@pytest.mark.parametrize(
    "saved_offset, expected_start_offset",
    [
        (-MS, 0),  # now - last == 1 ms: not < guard, start at now
        (-MS + 1, 1),  # now - last == 1 ms - 1 ns: last + 1 ms = now + 1 ns
        (-10 * S, 0),
        (0, MS),
    ],
)
def test_init_guard_boundary(saved_offset, expected_start_offset):
    store = MemoryKV()
    store.save(TSO_KEY, (T0 + saved_offset).to_bytes(8, "big"))
    core, _ = make_core(ManualClock(), store)
    assert core_state(core) == (T0 + expected_start_offset, 0)


def test_init_empty_saved_value_counts_as_nothing_saved():
    store = MemoryKV()
    store.save(TSO_KEY, b"")
    core, _ = make_core(ManualClock(), store)
    assert core_state(core) == (T0, 0)


def test_init_load_error_is_treated_as_nothing_saved_2_5_quirk():
    store = MemoryKV()
    window = T0 + 10 * S
    store.save(TSO_KEY, window.to_bytes(8, "big"))
    faulty = FaultyKV(store, lambda op, key: op == "load")
    core, _ = make_core(ManualClock(), faulty)
    # the future window was not seen: the oracle starts at its own clock, below the saved end
    assert core_state(core) == (T0, 0)
    assert core_state(core)[0] < window
    assert store.load(TSO_KEY) == (T0 + 3 * S).to_bytes(8, "big")


def test_init_with_a_saved_value_that_is_not_8_bytes_fails_and_saves_nothing():
    """Unlike a load error, a saved window that loads but is not 8 bytes makes ``ParseTimestamp`` fail, and
    ``InitTimestamp`` returns that error: the oracle stays uninitialised and the bad value stays in the KV."""
    store = MemoryKV()
    store.save(TSO_KEY, b"\x00" * 7)
    with pytest.raises(ValueError, match=r"invalid data, must 8 bytes, but 7"):
        make_core(ManualClock(), store)
    a = GlobalTSOAllocator("timestamp", RootedKV(store, "by-dev/kv/gid"), ManualClock())
    with pytest.raises(ValueError):
        a.initialize()
    assert a.tso.tso is None and a.get_last_saved_time() == 0
    assert store.load(TSO_KEY) == b"\x00" * 7


# =================================================================================================
# GenerateTSO retries
# =================================================================================================

def test_generate_tso_before_init_retries_with_200ms_sleeps_and_fails_after_10():
    a = new_allocator(MemoryKV(), ManualClock())
    sleeps = SleepLog()
    with pytest.raises(TSOError, match="can not get timestamp"):
        a.generate_tso(1, sleep=sleeps)
    assert sleeps.calls == [0.2] * 10


def test_generate_tso_steps_yield_sleep_effects_and_return_ts():
    a = new_allocator(MemoryKV(), ManualClock())
    steps = a.generate_tso_steps(3)
    assert next(steps) == Sleep(200 * MS)
    a.initialize()  # sync completes while the caller sleeps
    with pytest.raises(StopIteration) as stop:
        steps.send(None)
    assert stop.value.value == compose_ts(T0 // MS, 3)


def test_generate_tso_succeeds_once_init_completes_during_retries():
    a = new_allocator(MemoryKV(), ManualClock())
    sleeps = SleepLog(hook=lambda n: a.initialize() if n == 3 else None)
    assert a.generate_tso(4, sleep=sleeps) == compose_ts(T0 // MS, 4)
    assert sleeps.calls == [0.2] * 3


def test_generate_tso_overflow_bumps_logical_permanently_until_update():
    clock = ManualClock()
    a = new_allocator(MemoryKV(), clock)
    a.initialize()
    assert gen(a, MAX_LOGICAL - 10) == compose_ts(T0 // MS, MAX_LOGICAL - 10)
    sleeps = SleepLog()
    with pytest.raises(TSOError):
        a.generate_tso(20, sleep=sleeps)
    assert sleeps.calls == [0.05] * 10
    # every rejected attempt still added its count
    assert state(a) == (T0, MAX_LOGICAL - 10 + 10 * 20)
    # even a count of 1 that would have fitted before is now refused
    sleeps = SleepLog()
    with pytest.raises(TSOError):
        a.generate_tso(1, sleep=sleeps)
    assert len(sleeps.calls) == 10
    a.update_tso()  # logical > half: physical + 1 ms, logical 0
    assert state(a) == (T0 + MS, 0)
    assert gen(a, 20) == compose_ts(T0 // MS + 1, 20)


def test_generate_tso_overflow_recovers_when_ts_loop_runs_during_sleep():
    clock = ManualClock()
    a = new_allocator(MemoryKV(), clock)
    a.initialize()
    gen(a, MAX_LOGICAL - 1)

    def ts_loop(_n):
        clock.advance(50 * MS)
        a.update_tso()

    sleeps = SleepLog(hook=ts_loop)
    assert a.generate_tso(5, sleep=sleeps) == compose_ts((T0 + 50 * MS) // MS, 5)
    assert sleeps.calls == [0.05]


def test_generate_tso_without_limit_max_logic_never_sleeps_and_carries():
    a = new_allocator(MemoryKV(), ManualClock(), params=TSOParams(limit_max_logic=False))
    a.initialize()
    assert gen(a, MAX_LOGICAL + 5) == compose_ts(T0 // MS + 1, 5)


# =================================================================================================
# Core.AllocTimestamp
# =================================================================================================

def alloc_rpc(core: Core, count: int, block_timestamp: int = 0, sleep=no_sleep):
    return drive_with_sleep(core.alloc_timestamp_steps(count, block_timestamp), sleep)


def test_alloc_timestamp_returns_first_ts_of_the_batch():
    core, _ = make_core(ManualClock())
    first, count = alloc_rpc(core, 10)
    assert count == 10
    assert first == compose_ts(T0 // MS, 1)
    # GenerateTSO returned the last one; the next batch starts right after it
    first2, _ = alloc_rpc(core, 5)
    assert first2 == first + 10
    assert core_state(core) == (T0, 15)


def test_alloc_timestamp_error_propagates():
    core, _ = make_core(ManualClock())
    with pytest.raises(TSOError):
        alloc_rpc(core, 0)


def test_alloc_timestamp_block_timestamp_sleeps_until_window_passes_it_plus_200ms():
    core, _ = make_core(ManualClock())
    window = T0 + 3 * S  # 0.456789 ms past a whole ms
    block = compose_ts(window // MS + 500, 0)
    steps = core.alloc_timestamp_steps(1, block)
    assert next(steps) == Sleep((window // MS + 500) * MS - window + 200 * MS)
    with pytest.raises(StopIteration) as stop:
        steps.send(None)
    assert stop.value.value == (compose_ts(T0 // MS, 1), 1)


def test_alloc_timestamp_block_timestamp_sub_ms_delta_uses_ns_resolution():
    core, _ = make_core(ManualClock())
    window = T0 + 3 * S
    sleeps = SleepLog()
    # block time is the window's ms, i.e. 0.456789 ms BEFORE the window end: no wait
    alloc_rpc(core, 1, compose_ts(window // MS, 0), sleep=sleeps)
    assert sleeps.calls == []
    # one ms later is 0.543211 ms after the window end: wait that long + 200 ms
    alloc_rpc(core, 1, compose_ts(window // MS + 1, 0), sleep=sleeps)
    assert sleeps.calls == [((window // MS + 1) * MS - window + 200 * MS) / 1e9]
    assert sleeps.calls[0] == pytest.approx(0.200543211)


def test_alloc_timestamp_block_timestamp_in_past_does_not_sleep():
    core, _ = make_core(ManualClock())
    first, _ = alloc_rpc(core, 1, compose_ts(T0 // MS - 1000, 0))
    assert first == compose_ts(T0 // MS, 1)


# =================================================================================================
# Bug switches
# =================================================================================================

def test_switch_tso_skip_load_on_init_starts_below_saved_window():
    store = MemoryKV()
    window = T0 + 10 * S
    store.save(TSO_KEY, window.to_bytes(8, "big"))
    core, _ = make_core(ManualClock(), store, switches=BugSwitches(tso_skip_load_on_init=True))
    assert core_state(core) == (T0, 0)  # faithful: window + 1 ms
    assert core_gen(core, 1) < compose_ts(window // MS, 0)


def test_switch_tso_no_window_save_lets_physical_run_past_saved_window():
    clock = ManualClock()
    core, store = make_core(clock, switches=BugSwitches(tso_no_window_save=True))
    clock.advance(5 * S)
    assert core.ts_loop_tick()
    assert core_state(core) == (T0 + 5 * S, 0)
    assert core.tso_allocator.get_last_saved_time() == T0 + 3 * S
    assert store.load(TSO_KEY) == (T0 + 3 * S).to_bytes(8, "big")
    assert physical_time(core_gen(core, 1)) > (T0 + 3 * S) // MS
    # faithful behaviour for contrast
    clock2 = ManualClock()
    good, store2 = make_core(clock2)
    clock2.advance(5 * S)
    good.ts_loop_tick()
    assert store2.load(TSO_KEY) == (T0 + 8 * S).to_bytes(8, "big")


# =================================================================================================
# Events: every emit passes the run-log schema
# =================================================================================================

def test_every_tso_event_conforms_to_schema():
    sink = MemorySink()
    rec = Recorder("t", sinks=[sink])
    clock = ManualClock()
    fail = {"on": False}
    faulty = FaultyKV(MemoryKV(), lambda op, key: fail["on"] and op == "save")
    core = Core(faulty, clock, node="rc-1", recorder=rec)
    a0 = GlobalTSOAllocator("timestamp", RootedKV(MemoryKV(), "x"), clock, recorder=rec)
    with pytest.raises(TSOError):
        a0.generate_tso(1, sleep=lambda s: None)  # alloc_retry (not initialised), alloc_failed
    core.init_tso_allocator()  # save, init
    alloc_rpc(core, 3)  # alloc, rootcoord.alloc_timestamp
    with pytest.raises(TSOError):
        alloc_rpc(core, 0)
    with pytest.raises(TSOError):
        core.tso_allocator.generate_tso(MAX_LOGICAL, sleep=lambda s: None)  # overflow retries
    clock.advance(10 * MS)
    core.ts_loop_tick()  # update
    with pytest.raises(ValueError):
        core.tso_allocator.set_tso(2**64 - 1)
    core.tso_allocator.set_tso(compose_ts(clock.t // MS + 100, 0))
    core.tso_allocator.reset()
    fail["on"] = True
    clock.advance(10 * S)
    assert not core.ts_loop_tick()  # save_failed
    kinds = {row["kind"] for row in sink.rows}
    assert kinds == {
        "tso.alloc_retry", "tso.alloc_failed", "tso.save", "tso.init", "tso.alloc", "rootcoord.alloc_timestamp",
        "tso.update", "tso.set", "tso.reset", "tso.save_failed",
    }
    init = next(r for r in sink.rows if r["kind"] == "tso.init")
    assert (init["node"], init["physical_ms"], init["window_end_ms"]) == ("rc-1", T0 // MS, (T0 + 3 * S) // MS)


@pytest.mark.parametrize("pause_ms, after_resume", [
    (70, [1130, 1150, 1200, 1250]),  # one tick (1100) fell due in the pause: taken on resume, then the grid
    (100, [1160, 1200, 1250]),  # two fell due (1100, 1150): both taken on resume (the second a no-op), then the grid
])
def test_ts_loop_keeps_its_ticker_grid_across_a_pause(pause_ms, after_resume):
    """``tsLoop`` reads a ``time.Ticker`` of 50 ms: a pause delays the ticks that fall due in it but does not move
    the grid, so the tick after the resume comes at the next multiple of 50 ms, not 50 ms after the resume."""
    from milvus_edu.cluster.rootcoord import RootCoordNode
    from milvus_edu.sim import NodeClock, Simulation

    sink = MemorySink()
    sim = Simulation(3, Recorder("ts-loop-grid", sinks=[sink]))
    rc = RootCoordNode(sim, "rootcoord-1", 1, NodeClock(sim.env))
    sim.add(rc)
    rc.start()
    sim.at(1_060, lambda: rc.pause(pause_ms))
    sim.run(1_260)
    updates = [r["t_ms"] for r in sink.rows if r["kind"] == "tso.update"]
    assert [t for t in updates if t <= 1_050] == [50.0 * n for n in range(1, 22)]
    assert [t for t in updates if t > 1_050] == after_resume
