"""Hybrid-timestamp helpers: a port of Milvus 2.5 ``pkg/util/tsoutil/tso_test.go`` plus the rest of §1.3.

Go reads ``time.Now()``; here an instant is a fixed integer of Unix nanoseconds, so every expected
value is exact.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milvus_edu.tsoutil import (
    LOGICAL_BITS,
    LOGICAL_BITS_MASK,
    MAX_TIMESTAMP,
    NS_PER_MS,
    add_physical_duration_on_ts,
    calculate_duration,
    compose_ts,
    compose_ts_by_time,
    format_ts,
    get_current_time,
    is_valid_hybrid_ts,
    is_valid_physical_ts,
    logical_part,
    mod_24h,
    parse_hybrid_ts,
    parse_ts,
    physical_time,
    physical_time_seconds,
    sub_by_now,
)

MS = NS_PER_MS
S = 1000 * MS
# 2023-11-14T22:13:20.123456789Z: deliberately not a whole millisecond.
NOW_NS = 1_700_000_000_123_456_789
UTC = dt.timezone.utc


# ---- port of tso_test.go ----------------------------------------------------------------------

def test_parse_hybrid_ts_splits_the_go_sample_timestamp():
    # TestParseHybridTs only logs; pin the values it logs.
    ts = 426152581543231492
    physical, logical = parse_hybrid_ts(ts)
    assert (physical, logical) == (1625643087552, 4)
    when, logical2 = parse_ts(ts)
    assert when == dt.datetime(2021, 7, 7, 7, 31, 27, 552000, tzinfo=UTC)
    assert logical2 == 4
    assert physical_time(ts) == 1625643087552
    assert logical_part(ts) == 4


def test_compose_ts_by_time_roundtrips_seconds_and_logical():
    # Test_Tso / "test ComposeTSByTime"
    ts = compose_ts_by_time(NOW_NS, 1000)
    when, logical = parse_ts(ts)
    assert int(when.timestamp()) == NOW_NS // S
    assert logical == 1000
    # the physical part keeps whole milliseconds of the instant (sub-ms is dropped)
    assert physical_time(ts) == NOW_NS // MS
    assert when == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)


@pytest.mark.parametrize("unix_ns, physical_ms", [
    (1_999_999, 1),  # sub-millisecond part dropped
    (-1, 0),  # Go's integer division truncates toward zero: a nanosecond before the epoch is millisecond 0
    (-1_500_000, -1),  # not -2, as flooring would give
])
def test_compose_ts_by_time_divides_nanoseconds_like_go(unix_ns, physical_ms):
    """``ComposeTSByTime`` takes ``UnixNano() / int64(time.Millisecond)``, a Go division that truncates toward zero."""
    assert compose_ts_by_time(unix_ns, 5) == compose_ts(physical_ms, 5)


def test_calculate_duration_is_physical_difference_in_ms():
    ts1 = compose_ts_by_time(NOW_NS, 0)
    ts2 = compose_ts_by_time(NOW_NS + 20_000 * MS, 0)
    assert calculate_duration(ts2, ts1) == 20_000
    assert calculate_duration(ts1, ts2) == -20_000


def test_calculate_duration_ignores_logical_part():
    p = NOW_NS // MS
    assert calculate_duration(compose_ts(p, 5), compose_ts(p, 200_000)) == 0
    assert calculate_duration(compose_ts(p + 1, 0), compose_ts(p, LOGICAL_BITS_MASK)) == 1


def test_add_physical_duration_on_ts_positive_and_negative():
    ts1 = compose_ts_by_time(NOW_NS, 0)
    d = 20_000 * MS
    assert add_physical_duration_on_ts(ts1, d) == compose_ts_by_time(NOW_NS + d, 0)
    assert add_physical_duration_on_ts(ts1, -d) == compose_ts_by_time(NOW_NS - d, 0)


def test_add_physical_duration_on_ts_keeps_logical():
    ts = compose_ts(1_000_000, 777)
    assert parse_hybrid_ts(add_physical_duration_on_ts(ts, 5 * MS)) == (1_000_005, 777)
    assert parse_hybrid_ts(add_physical_duration_on_ts(ts, -5 * MS)) == (999_995, 777)


@pytest.mark.parametrize(
    "duration_ns, expected_ms",
    [
        (1_900_000, 1),  # 1.9 ms -> 1 ms
        (-1_900_000, -1),  # -1.9 ms -> -1 ms (toward zero, not floor's -2)
        (999_999, 0),
        (-999_999, 0),  # floor would give -1
        (-1, 0),
        (-1_000_000, -1),
        (-1_000_001, -1),
        (0, 0),
    ],
)
def test_add_physical_duration_on_ts_truncates_sub_ms_toward_zero(duration_ns, expected_ms):
    ts = compose_ts(1_000_000, 3)
    assert parse_hybrid_ts(add_physical_duration_on_ts(ts, duration_ns)) == (1_000_000 + expected_ms, 3)


def test_is_valid_unix_milli_physical_versus_hybrid():
    # TestIsValidUnixMilli
    physical_ms = NOW_NS // MS
    assert is_valid_physical_ts(physical_ms)
    assert not is_valid_hybrid_ts(physical_ms)
    hybrid = get_current_time(NOW_NS)
    assert not is_valid_physical_ts(hybrid)
    assert is_valid_hybrid_ts(hybrid)


@pytest.mark.parametrize(
    "physical_ms, valid",
    [
        (1546300800000 - 1, False),
        (1546300800000, True),  # 2019-01-01T00:00:00Z
        (253402300799000, True),  # 9999-12-31T23:59:59Z
        (253402300799000 + 1, False),
        (0, False),
    ],
)
def test_is_valid_physical_ts_bounds_inclusive(physical_ms, valid):
    assert is_valid_physical_ts(physical_ms) is valid
    if physical_ms < 1 << 46:  # a hybrid ts has only 46 physical bits (up to year 4199)
        assert is_valid_hybrid_ts(compose_ts(physical_ms, 12345)) is valid


def test_is_valid_hybrid_ts_largest_hybrid_is_valid():
    # 46 physical bits end in the year 4199, well inside the physical upper bound
    assert is_valid_hybrid_ts(MAX_TIMESTAMP)
    assert not is_valid_hybrid_ts(compose_ts(1546300800000 - 1, LOGICAL_BITS_MASK))


# ---- the rest of §1.3 --------------------------------------------------------------------------

def test_compose_ts_carries_logical_overflow_into_physical():
    assert compose_ts(5, 1 << LOGICAL_BITS) == compose_ts(6, 0)
    assert compose_ts(5, (1 << LOGICAL_BITS) + 3) == compose_ts(6, 3)
    assert compose_ts(5, 10 << LOGICAL_BITS) == compose_ts(15, 0)
    # with `|` the overflow bit would be absorbed by physical bit 0 (5 = 0b101): the result would stay at 5
    assert ((5 << LOGICAL_BITS) | (1 << LOGICAL_BITS)) == compose_ts(5, 0)
    assert compose_ts(5, 1 << LOGICAL_BITS) != compose_ts(5, 0)


def test_compose_ts_wraps_to_64_bits_like_go_uint64():
    assert compose_ts(1 << 46, 0) == 0
    assert compose_ts((1 << 46) - 1, LOGICAL_BITS_MASK) == MAX_TIMESTAMP
    assert compose_ts(-1, 0) == MAX_TIMESTAMP - LOGICAL_BITS_MASK


def test_get_current_time_is_compose_by_time_with_zero_logical():
    assert get_current_time(NOW_NS) == compose_ts(NOW_NS // MS, 0)


def test_physical_time_seconds_is_fractional_seconds():
    assert physical_time_seconds(compose_ts(1_700_000_000_123, 99)) == pytest.approx(1_700_000_000.123)
    assert physical_time_seconds(compose_ts(1500, 0)) == 1.5


def test_mod_24h_keeps_time_of_day_and_logical():
    day = 24 * 3600 * 1000
    ts = compose_ts(19_000 * day + 12_345, 7)
    assert parse_hybrid_ts(mod_24h(ts)) == (12_345, 7)
    assert mod_24h(compose_ts(day, 1)) == compose_ts(0, 1)
    assert mod_24h(compose_ts(day - 1, 0)) == compose_ts(day - 1, 0)


def test_sub_by_now_is_ms_from_physical_to_now():
    ts = compose_ts(NOW_NS // MS, 4000)
    assert sub_by_now(ts, NOW_NS) == 0
    assert sub_by_now(ts, NOW_NS + 1500 * MS) == 1500
    assert sub_by_now(ts, NOW_NS - 2 * S) == -2000


def test_format_ts_renders_utc_time_of_day_ms_and_logical():
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    ts = compose_ts(int(when.timestamp() * 1000), 9)
    assert format_ts(ts) == "03:04:05.678+9"
    assert format_ts(compose_ts(1704164645007, 0)) == "03:04:05.007+0"


# ---- properties ---------------------------------------------------------------------------------

physicals = st.integers(min_value=0, max_value=(1 << 46) - 1)
logicals = st.integers(min_value=0, max_value=LOGICAL_BITS_MASK)


@given(physicals, logicals)
def test_property_compose_parse_roundtrip(physical, logical):
    ts = compose_ts(physical, logical)
    assert parse_hybrid_ts(ts) == (physical, logical)
    assert 0 <= ts <= MAX_TIMESTAMP
    when, lg = parse_ts(ts)
    assert lg == logical
    assert round((when - dt.datetime(1970, 1, 1, tzinfo=UTC)) / dt.timedelta(milliseconds=1)) == physical


@given(physicals, logicals, physicals)
def test_property_compose_is_monotone_in_physical_then_logical(p1, logical, p2):
    if p1 < p2:
        assert compose_ts(p1, logical) < compose_ts(p2, 0)


@given(
    st.integers(min_value=1 << 40, max_value=1 << 45),
    logicals,
    st.integers(min_value=-(10**15), max_value=10**15),
)
def test_property_add_physical_duration_has_inverse(physical, logical, duration_ns):
    ts = compose_ts(physical, logical)
    shifted = add_physical_duration_on_ts(ts, duration_ns)
    assert logical_part(shifted) == logical
    # the shift is the duration truncated toward zero to whole ms
    ms = abs(duration_ns) // MS * (1 if duration_ns >= 0 else -1)
    assert calculate_duration(shifted, ts) == ms
    assert add_physical_duration_on_ts(shifted, -duration_ns) == ts
