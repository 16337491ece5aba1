"""Lab 5's self-checks judge answers against the sweep's tables they are given (hand-built here, in the shape
milvus_edu.analysis.many returns), and name the usual mistakes."""

from __future__ import annotations

import pandas as pd

from milvus_edu.labs.scale import check_latency_growth, check_seeds_to_catch, check_wait_driver

WAITS = pd.DataFrame({"opt_proxies": [1.0, 1.0, 2.0, 2.0],
                      "param_timetick_time_tick_interval_ns": [50e6, 200e6, 50e6, 200e6],
                      "p50_max_wait_ms": [52.0, 188.0, 53.0, 190.0]})
CATCH = pd.DataFrame({"switches": ["sw"] * 4 + [""] * 2, "opt_inserts_per_s": [10.0] * 4 + [10.0] * 2,
                      "seeds": [1, 2, 3, 4, 1, 2], "rate": [0.3, 0.6, 0.9, 1.0, 0.0, 0.0]})
LATENCY = pd.DataFrame({"opt_rpc_failure_rate": [0.0, 0.3, 0.6], "p50_latency_ms": [2507.8, 2509.6, 4010.8]})


def test_wait_driver_follows_the_table():
    assert check_wait_driver("interval", WAITS) and check_wait_driver("time tick interval", WAITS)
    assert not check_wait_driver("proxies", WAITS)
    flipped = WAITS.assign(p50_max_wait_ms=[50.0, 51.0, 150.0, 152.0])  # now the proxies move it more
    assert check_wait_driver("proxies", flipped) and not check_wait_driver("interval", flipped)
    assert "neither" in str(check_wait_driver("seeds", WAITS))
    pending = check_wait_driver(None, WAITS)
    assert not pending and not pending.answered


def test_seeds_to_catch_is_the_smallest_n_reaching_the_target():
    assert check_seeds_to_catch(3, CATCH, inserts_per_s=10)
    assert "below 90%" in str(check_seeds_to_catch(2, CATCH, inserts_per_s=10))
    assert "fewer are too" in str(check_seeds_to_catch(4, CATCH, inserts_per_s=10))
    assert check_seeds_to_catch(4, CATCH, inserts_per_s=10, target=1.0)
    assert "as an int" in str(check_seeds_to_catch(3.0, CATCH, inserts_per_s=10))
    assert "no row" in str(check_seeds_to_catch(3, CATCH, inserts_per_s=50))
    never = CATCH.assign(rate=[0.1, 0.2, 0.3, 0.4, 0.0, 0.0])
    assert "sweep more seeds" in str(check_seeds_to_catch(4, never, inserts_per_s=10))
    assert not check_seeds_to_catch(None, CATCH, inserts_per_s=10).answered


def test_latency_growth_within_a_millisecond():
    growth = 4010.8 - 2507.8
    assert check_latency_growth(growth, LATENCY, low=0, high=0.6)
    assert check_latency_growth(round(growth), LATENCY, low=0, high=0.6)
    assert "reversed" in str(check_latency_growth(-growth, LATENCY, low=0, high=0.6))
    assert "seconds" in str(check_latency_growth(growth / 1000, LATENCY, low=0, high=0.6))
    assert not check_latency_growth(growth + 50, LATENCY, low=0, high=0.6)
    assert "pandas" in str(check_latency_growth(LATENCY.p50_latency_ms, LATENCY, low=0, high=0.6))
    assert "no row" in str(check_latency_growth(1.0, LATENCY, low=0, high=0.9))
    assert not check_latency_growth(None, LATENCY, low=0, high=0.6).answered


def test_latency_growth_names_the_column_when_another_statistic_is_given():
    table = LATENCY.assign(mean_latency_ms=[2507.9, 2758.6, 4764.4], max_latency_ms=[2508.6, 3009.4, 8025.0])
    for column in ("mean_latency_ms", "max_latency_ms"):
        other = float(table[column].iloc[2] - table[column].iloc[0])
        feedback = check_latency_growth(other, table, low=0, high=0.6)
        assert not feedback and f"`{column}` grew" in str(feedback) and "`p50_latency_ms`" in str(feedback)
    assert check_latency_growth(4010.8 - 2507.8, table, low=0, high=0.6)
    assert "grew" not in str(check_latency_growth(1.0, table, low=0, high=0.6))
