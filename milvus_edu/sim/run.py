"""Run a scenario: build the cluster, simulate, write the run folder, summarise and check.

A run folder holds ``events.parquet`` (the run log), ``events.jsonl`` (the same rows, for reading
by eye) and ``summary.json`` (what ran, event counts, checks, headline numbers). Nothing in it
depends on the wall clock, so the same scenario, seed and config give byte-identical files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import __version__
from ..check import check_tso
from ..config import BugSwitches, Config
from ..events import SCHEMA_VERSION, JsonlSink, MemorySink, ParquetSink, Recorder, rows_to_frame
from .kernel import NetworkParams, Simulation
from .scenarios import get_scenario

RUN_FILES = ("events.parquet", "events.jsonl", "summary.json")


class RunFolderError(Exception):
    """The output folder cannot be used (exists and is not empty, not writable, ...)."""


@dataclass
class RunResult:
    """The outcome of :func:`simulate`: the events (when kept in memory), the summary, the folder."""

    summary: dict
    out_dir: Path | None = None
    rows: list[dict] = field(default_factory=list, repr=False)

    @property
    def events(self) -> pd.DataFrame:
        """The run log as a DataFrame (requires ``keep_events=True``)."""
        return rows_to_frame(self.rows)

    @property
    def violations(self) -> list[dict]:
        """Every invariant violation found by the checkers."""
        return self.summary["checks"]["violations"]


def prepare_out_dir(out_dir: str | os.PathLike, force: bool) -> Path:
    """Create ``out_dir`` or check it may be written; never touches files other than the run's own.

    An existing non-empty folder needs ``force``; even then only ``events.parquet``,
    ``events.jsonl`` and ``summary.json`` are replaced.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out} exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise RunFolderError(f"{out} exists and is not empty; choose another --out or add --force to replace its run files")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".milvus-edu-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise RunFolderError(f"cannot write to {out} ({exc.strerror}); choose a writable --out") from None
    return out


def simulate(
    scenario: str,
    seed: int = 1,
    duration_s: float | None = None,
    out_dir: str | os.PathLike | None = None,
    force: bool = False,
    switches: BugSwitches | list[str] | None = None,
    keep_events: bool = True,
    network: NetworkParams | None = None,
) -> RunResult:
    """Simulate ``scenario`` with ``seed`` for ``duration_s`` simulated seconds (the scenario's default).

    With ``out_dir`` the run folder is written; with ``keep_events`` the rows stay in memory too
    (``result.events``). ``switches`` turns bug switches on (names or a :class:`BugSwitches`).
    """
    spec = get_scenario(scenario)
    if duration_s is None:
        duration_s = spec.duration_s
    if not duration_s > 0:
        raise ValueError(f"duration must be positive, got {duration_s}")
    if isinstance(switches, BugSwitches):
        sw = switches
    else:
        sw = BugSwitches.from_names(list(switches or []))
    config = Config(switches=sw)
    run_id = f"{scenario}-s{seed}" + "".join(f"+{n}" for n in sw.enabled())
    out = prepare_out_dir(out_dir, force) if out_dir is not None else None

    memory = MemorySink()
    sinks: list = [memory] if keep_events else []
    meta = {"scenario": scenario, "seed": str(seed), "duration_s": repr(float(duration_s)),
            "switches": ",".join(sw.enabled())}
    if out is not None:
        sinks += [ParquetSink(out / "events.parquet", metadata=meta), JsonlSink(out / "events.jsonl")]
    # The checkers need the events even when the caller does not keep them.
    check_sink = memory if keep_events else MemorySink()
    if not keep_events:
        sinks.append(check_sink)
    recorder = Recorder(run_id, sinks=sinks)
    sim = Simulation(seed, recorder, config, network)
    recorder.emit("run.start", "sim", detail={"scenario": scenario, "seed": seed, "duration_s": duration_s,
                                              "switches": sw.enabled(), "version": __version__})
    spec.build(sim)
    sim.run(duration_s * 1000.0)
    recorder.emit("run.end", "sim", detail={"events": recorder.seq + 1})
    recorder.close()

    frame = rows_to_frame(check_sink.rows)
    violations = [v.to_dict() for v in check_tso(frame)]
    summary = _summary(spec, seed, duration_s, config, recorder, frame, violations, run_id)
    if out is not None:
        with open(out / "summary.json", "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
            fh.write("\n")
    return RunResult(summary, out, memory.rows if keep_events else [])


def _summary(spec, seed, duration_s, config, recorder, frame, violations, run_id) -> dict:
    recv = frame[(frame["kind"] == "client.recv")]
    allocs = frame[(frame["kind"] == "rootcoord.alloc_timestamp") & frame["error"].isna()]
    kills = frame[frame["kind"] == "fault.kill"]
    actives = frame[frame["kind"] == "session.active"]
    failover = None
    if len(kills):
        t_kill = float(kills["t_ms"].iloc[0])
        after = actives[actives["t_ms"] > t_kill]
        first_recv = recv[recv["t_ms"] > t_kill]
        last_before = recv[recv["t_ms"] <= t_kill]
        failover = {
            "killed": str(kills["node"].iloc[0]),
            "killed_at_ms": t_kill,
            "new_active": str(after["node"].iloc[0]) if len(after) else None,
            "new_active_at_ms": float(after["t_ms"].iloc[0]) if len(after) else None,
            "client_gap_ms": (float(first_recv["t_ms"].iloc[0]) - float(last_before["t_ms"].iloc[-1]))
            if len(first_recv) and len(last_before) else None,
        }
    return {
        "run_id": run_id,
        "scenario": spec.name,
        "description": spec.description,
        "seed": seed,
        "duration_s": float(duration_s),
        "schema_version": SCHEMA_VERSION,
        "milvus_edu_version": __version__,
        "config": config.to_dict(),
        "switches": config.switches.enabled(),
        "events": recorder.seq,
        "events_by_kind": dict(sorted(recorder.counts.items())),
        "tso": {
            "allocations": int(len(allocs)),
            "timestamps_handed_out": int(allocs["count"].sum()) if len(allocs) else 0,
            "window_saves": int(recorder.counts.get("tso.save", 0)),
            "client_answers": int(len(recv)),
            "client_errors": int(recorder.counts.get("client.error", 0)),
            "first_ts": int(allocs["ts"].iloc[0]) if len(allocs) else None,
            "last_ts": int(allocs["ts"].iloc[-1] + allocs["count"].iloc[-1] - 1) if len(allocs) else None,
        },
        "failover": failover,
        "checks": {"ok": not violations, "violations": violations},
    }
