"""Reference answers to the exercises of the lab notebooks, for tests only (never shipped in a notebook).

``SOLUTIONS[notebook file name]`` maps ``answer_N`` to a Python source expression, evaluated in the
notebook's kernel where the shipped ``answer_N = None`` line was: it may use what the notebook defined
before that line (``events``, ``new_active`` ...). :func:`inject` puts them into a notebook.
"""

from __future__ import annotations

import re

SOLUTIONS: dict[str, dict[str, str]] = {
    "01_tso.ipynb": {
        "answer_1": "(1767225601000 << 18) + 42",
        "answer_2": "int(events[(events.kind == 'rootcoord.alloc_timestamp') & (events.node == new_active)"
                    " & (events.peer == 'client-1')].ts.iloc[0])",
        "answer_3": "2**18 - 1",
        "answer_4": "'global-monotonic'",
        "answer_5": "(2**18 - 1) * 20",
    },
    "02_timetick.ipynb": {
        "answer_1": "int((lambda ts: (ts < ts.cummax().shift(fill_value=0)).sum())"
                    "(dml[dml.channel == CH].end_ts.astype('int64')))",
        "answer_2": "min(int(json.loads(r.detail)['channels'].get(CH, r.ts)) for r in "
                    "events[(events.kind == 'rootcoord.timetick_update') & (events.seq <= ROUND)]"
                    ".drop_duplicates('peer', keep='last').itertuples())",
        "answer_3": "int(((dml.vchannel == pack.vchannel) & (dml.end_ts > pack.begin_ts) & (dml.end_ts <= pack.end_ts)).sum())",
        "answer_4": "'watermark'",
    },
    "03_flush_checkpoint.ipynb": {
        "answer_1": "sum(len(pd.read_parquet(p)) for p in (BUCKET / 'insert_log').glob(f'*/*/{SEG}/100/*'))",
        "answer_2": "int(((bev.kind == 'datacoord.channel_cp') & (bev.vchannel == V0) & (bev.peer != 'WatchChannels')"
                    " & bev.error.isna() & (bev.seq > SET) & (bev.seq < NEXT)).sum())",
        "answer_3": "int(cev[cev.kind == 'datanode.filter']['count'].sum())",
        "answer_4": "'durable'",
    },
    "04_guarantee_ts.ipynb": {
        "answer_1": "sorted(int(r) for r in iev[(iev.kind == 'client.read') & (iev['count'] == 0)].request)",
        "answer_2": "int(events[(events.kind == 'client.read') & (events.request == READ)].ts.iloc[0])",
        "answer_3": "'Bounded'",
        "answer_4": "[{'at': 0.5, 'client': 'Client1', 'op': 'create_collection', 'collection': 'C0'},"
                    " {'at': 1.0, 'client': 'Client1', 'op': 'insert', 'collection': 'C0', 'data': [{'id': 'A1'}]},"
                    " {'at': 1.02, 'client': 'Client2', 'op': 'query', 'collection': 'C0', 'consistency_level': 'Session'},"
                    " {'at': 1.02, 'client': 'Client1', 'op': 'query', 'collection': 'C0', 'consistency_level': 'Session'}]",
        "answer_5": "round(json.loads(PHASE_RUNS[200, 1][PHASE_RUNS[200, 1].kind == 'rootcoord.ticker_start']"
                    ".detail.iloc[0])['sync_ts_phase_ms'])",
    },
    "05_at_scale.ipynb": {
        "answer_1": "'time tick interval'",
        "answer_2": "int(catch_2[(catch_2.opt_inserts_per_s == 10) & (catch_2.rate >= 0.9)].seeds.min())",
        "answer_3": "float(table_3.set_index('opt_rpc_failure_rate').p50_latency_ms.pipe(lambda s: s[0.6] - s[0.0]))",
    },
    "06_real_milvus.ipynb": {
        "answer_1": "(int(detail_dict(events[events.seq == TICK].detail.iloc[0])['sampled_clock_ms'])"
                    " - int(detail_dict(events[events.seq == TICK].detail.iloc[0])['lag_ms'])) << 18",
        "answer_2": "'delete'",
        "answer_3": "int(session.real_events[(session.real_events.kind == 'client.insert')"
                    " & (session.real_events.node == 'Client1')].ts.iloc[0])",
    },
    "07_incidents.ipynb": {
        "answer_1": "(int(iev[(iev.kind == 'client.insert') & (iev.node == 'Client1')"
                    " & (iev.seq < start_event(iev, MISSED) - 1)].ts.iloc[-1]) >> 18)"
                    " - (int(iev[(iev.kind == 'client.read') & (iev.request == MISSED)].ts.iloc[0]) >> 18)",
        "answer_2": "6500 - 5000",
        "answer_3": "json.loads(tev[tev.kind == 'fault.kill'].detail.iloc[0])['server_id']",
        "answer_4": "(((int(refused.tick_ts) >> 18) + 86_400_000) << 18) + 2**18 - 1",
    },
    "08_break_it.ipynb": {  # a checker that fails in the switch's run (or 'none'), then the letter of Milvus's line
        "answer_1": "'global-monotonic'", "answer_2": "'c'",
        "answer_3": "'window'", "answer_4": "'b'",
        "answer_5": "'watermark'", "answer_6": "'b'",
        "answer_7": "'none'", "answer_8": "'b'",
        "answer_9": "'checkpoint-safe'", "answer_10": "'c'",
        "answer_11": "'durable'", "answer_12": "'c'",
        "answer_13": "'checkpoint-retried'", "answer_14": "'a'",
        "answer_15": "'read-after-guarantee'", "answer_16": "'a'",
        "answer_17": "'mvcc-exact'", "answer_18": "'b'",
        "answer_19": "'mvcc-exact'", "answer_20": "'b'",
        "answer_21": "'session-sees-own'", "answer_22": "'c'",
    },
}

_SHIPPED = r"^(?P<name>answer_\d+) = None\b.*$"


def shipped_answers(nb) -> list[str]:
    """The ``answer_N`` names that the notebook ships as ``answer_N = None``, in cell order."""
    return [m.group("name") for cell in nb.cells if cell.cell_type == "code"
            for m in re.finditer(_SHIPPED, cell.source, re.M)]


def inject(nb, solutions: dict[str, str]):
    """Replace each ``answer_N = None ...`` line of ``nb`` (in place) by ``answer_N = <solution>``.

    Raises ``KeyError`` for an exercise without a solution and ``ValueError`` for a solution whose
    exercise the notebook does not ship.
    """
    used = set()

    def put(m: re.Match) -> str:
        name = m.group("name")
        used.add(name)
        return f"{name} = {solutions[name]}"

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = re.sub(_SHIPPED, put, cell.source, flags=re.M)
    unused = set(solutions) - used
    if unused:
        raise ValueError(f"no `answer_N = None` line for {sorted(unused)}")
    return nb


def read_notebook(path):
    """The notebook at ``path`` as nbformat reads it. nbformat is imported here, when a test reads a lab, not by
    every worker that collects the modules importing this one: its schema checker adds ~130,000 objects to a
    process's heap (186,000 to 313,000 for a worker's imports), and every full collection walks them again."""
    import nbformat

    return nbformat.read(path, as_version=4)
