"""Lab 6's self-checks on small real-run logs built here (the notebook's own run needs a live Milvus server).

Each check is held to accept the right answer, name the usual mistakes, and say what to do when the events or
the row it is given are not what the notebook passes (a cell run out of order, another run's events)."""

from __future__ import annotations

import json

from milvus_edu.events import SIM_EPOCH_MS, rows_to_frame
from milvus_edu.labs.real import check_sampled_tick, check_session_guarantee

CLOCK, LAG = 1_764_000_000_123, 37  # a sample's wall clock (ms) and the lag its gauge held


def _rows(*rows: dict):
    return rows_to_frame([{"run_id": "real", "seq": i, "t_ms": float(i), **r} for i, r in enumerate(rows)])


def _tick_events():
    detail = {"metric": "rootcoord_produce_tt_lag_ms", "lag_ms": LAG, "sampled_clock_ms": CLOCK}
    return _rows({"node": "sim", "kind": "run.start", "detail": "{}"},
                 {"node": "rootcoord-1", "kind": "mq.produce", "ts": (CLOCK - LAG) << 18, "tick_ts": (CLOCK - LAG) << 18,
                  "msg_type": "TimeTick", "detail": json.dumps(detail)})


def test_the_sampled_tick_check_accepts_the_tick_and_names_each_usual_mistake():
    events = _tick_events()
    assert check_sampled_tick((CLOCK - LAG) << 18, events, 1).ok
    assert "shift it left by 18" in check_sampled_tick(CLOCK - LAG, events, 1).message
    assert "subtract it" in check_sampled_tick((CLOCK + LAG) << 18, events, 1).message
    assert "`lag_ms` older" in check_sampled_tick(CLOCK << 18, events, 1).message


def test_the_sampled_tick_check_given_a_row_that_is_no_sampled_tick_says_to_run_the_cells_again():
    events = _tick_events()
    for seq in (0, 5):  # the run's start, a row past the end
        verdict = check_sampled_tick((CLOCK - LAG) << 18, events, seq)
        assert not verdict.ok and "run the cells above again" in verdict.message and f"Row {seq}" in verdict.message


def _session_events(guarantee=(200 << 18)):
    return _rows({"node": "Client1", "kind": "client.insert", "ts": 100 << 18},
                 {"node": "Client2", "kind": "client.insert", "ts": 300 << 18},
                 {"node": "Client1", "kind": "client.insert", "ts": 200 << 18},
                 {"node": "Client1", "kind": "client.delete", "ts": 0},
                 {"node": "Client1", "kind": "client.read_start", "request": 7, "level": "Session",
                  "guarantee_ts": guarantee},
                 {"node": "Client1", "kind": "client.insert", "ts": 400 << 18})


def test_the_session_check_accepts_the_last_insert_and_names_each_usual_mistake():
    events = _session_events()
    assert check_session_guarantee(200 << 18, events, 7).ok
    assert "0 never replaces" in check_session_guarantee(0, events, 7).message
    assert "not its last one" in check_session_guarantee(100 << 18, events, 7).message
    other = check_session_guarantee(300 << 18, events, 7)  # another client's insert
    assert not other.ok and "Client1's `client.insert` rows" in other.message
    assert "came after the read" in check_session_guarantee(400 << 18, events, 7).message
    model = check_session_guarantee((SIM_EPOCH_MS + 1_500) << 18, events, 7)  # a model run's timestamp
    assert not model.ok and "model's clock" in model.message and "session.real_events" in model.message


def test_the_session_check_given_no_such_read_says_to_run_the_cells_again():
    for events, request in ((_session_events(), 8), (_session_events(guarantee=None), 7)):
        verdict = check_session_guarantee(200 << 18, events, request)
        assert not verdict.ok and "run the cells above again" in verdict.message
