"""The TimeTick loops' own tickers and their phases (issue 24).

Rootcoord's ``syncTsLoop`` moves the DDL minimum on and ``startTimeTickLoop`` sends it, each on its own ticker; a
proxy's ``tickLoop`` and ``sendChannelsTimeTickLoop`` also tick on their own grids. These tests read the phases
back from the run log and check that the DDL minimum's age and the reports' times follow them.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.config import Config, TimeTickParams

SHORT = 1.5  # seconds: a few rounds of ticks are enough


def _events(seed=1, params=None, scenario="timetick-basics"):
    return milvus_edu.simulate(scenario, seed=seed, duration_s=SHORT, params=params or {}).events


def _allocations(ev):
    """(logged at ms, ts) of every timestamp a proxy allocated: its enqueues and ticks, in log order."""
    alloc = ev[ev["kind"].isin(["proxy.enqueue", "proxy.tick"])]
    return list(zip(alloc["t_ms"].astype(float), alloc["ts"].astype("int64")))


def _ddl_sends(ev):
    ddl = ev[(ev["kind"] == "rootcoord.timetick_update") & (ev["peer"] == "ddl")]
    return list(zip(ddl["t_ms"].astype(float), ddl["ts"].astype("int64")))


def _phases(ev, kind):
    return [json.loads(d) for d in ev[ev["kind"] == kind]["detail"]]


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(phase=st.integers(min_value=0, max_value=199))
def test_the_ddl_minimum_is_sent_as_old_as_the_sync_ts_phase(phase):
    # The TSO's physical part moves in 50 ms steps, so the age is read from the order of timestamps: the DDL
    # minimum sent at t was allocated at t - phase, after every timestamp a proxy logged before then and before
    # every one it logged well after (an allocation is logged when its RPC returns, within RPC_MS).
    rpc_ms = 10.0
    ev = _events(params={"timetick.sync_ts_phase_ms": phase})
    allocations, sends = _allocations(ev), _ddl_sends(ev)
    assert len(sends) >= 5
    for t, ts in sends[1:]:
        synced = t - phase
        assert all(a < ts for at, a in allocations if at < synced)
        assert all(a > ts for at, a in allocations if at > synced + rpc_ms)
    assert _phases(ev, "rootcoord.ticker_start") == [{"sync_ts_phase_ms": phase}]


def test_drawn_phases_lie_within_their_periods_and_depend_on_the_seed():
    seen = []
    for seed in (1, 2, 3):
        ev = _events(seed)
        (rc,) = _phases(ev, "rootcoord.ticker_start")
        proxies = _phases(ev, "proxy.ticker_start")
        assert len(proxies) == 2
        assert 0 <= rc["sync_ts_phase_ms"] < 200
        for p in proxies:
            assert 0 <= p["tick_phase_ms"] < 100 and 0 <= p["report_phase_ms"] < 200
        seen.append((rc["sync_ts_phase_ms"], proxies[0]["report_phase_ms"]))
    assert len(set(seen)) == 3


def test_a_proxy_reports_on_its_own_grid():
    ev = _events(params={"timetick.proxy_report_phase_ms": 37, "timetick.proxy_ticker_phase_ms": 11})
    for name in ("proxy-1", "proxy-2"):
        start = float(ev[(ev["kind"] == "proxy.ticker_start") & (ev["node"] == name)]["t_ms"].iloc[0])
        reports = ev[(ev["kind"] == "proxy.report") & (ev["node"] == name)]["t_ms"].astype(float).tolist()
        ticks = ev[(ev["kind"] == "proxy.tick") & (ev["node"] == name)]["t_ms"].astype(float).tolist()
        assert len(reports) >= 5
        for i, t in enumerate(reports):
            assert t == pytest.approx(start + 37 + 200 * (i + 1))
        # a tick is logged after its AllocTimestamp RPC, a few ms after the grid point
        for i, t in enumerate(ticks):
            assert 0 <= t - (start + 11 + 100 * (i + 1)) < 20


def test_phases_out_of_range_are_refused_with_the_rule():
    with pytest.raises(ValueError, match=r"^parameter timetick.proxy_ticker_phase_ms must be -1 .* below 100 ms"):
        Config().with_params({"timetick.proxy_ticker_phase_ms": "100"})
    with pytest.raises(ValueError, match="below 25 ms"):  # the period follows the interval
        Config().with_params({"timetick.time_tick_interval_ns": 50_000_000, "timetick.proxy_ticker_phase_ms": 30})
    assert TimeTickParams(sync_ts_phase_ms=199.5).sync_ts_phase_ms == 199.5


def test_cli_refuses_a_bad_phase_in_one_line(capsys, tmp_path):
    from milvus_edu.cli import main

    code = main(["simulate", "--scenario", "timetick-basics", "--out", str(tmp_path / "run"),
                 "--param", "timetick.sync_ts_phase_ms=-5"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sync_ts_phase_ms must be -1" in err[0]
