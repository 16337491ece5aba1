"""Run a scenario: build the cluster, simulate, write the run folder, summarise and check.

A run folder holds ``events.parquet`` (the run log), ``events.jsonl`` (the same rows, for reading
by eye) and ``summary.json`` (what ran, event counts, checks, headline numbers). Nothing in it
depends on the wall clock, so the same scenario, seed and config give byte-identical files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import __version__
from ..check import INVARIANTS, TSOChecker
from ..config import BugSwitches, Config
from ..events import SCHEMA_VERSION, JsonlSink, MemorySink, ParquetSink, Recorder, load_run, rows_to_frame
from ..narrate import ts_text
from .kernel import NetworkParams, Simulation
from .scenarios import get_scenario

RUN_FILES = ("events.parquet", "events.jsonl", "summary.json")


class RunFolderError(Exception):
    """The output folder cannot be used (exists and is not empty, not writable, ...)."""


@dataclass(repr=False)
class RunResult:
    """The outcome of :func:`simulate`: the events (when kept in memory), the summary, the folder."""

    summary: dict
    out_dir: Path | None = None
    rows: list[dict] = field(default_factory=list)
    kept: bool = True

    @property
    def events(self) -> pd.DataFrame:
        """The run log as a DataFrame: from memory, or read back from ``out_dir`` when not kept."""
        if self.kept:
            return rows_to_frame(self.rows)
        if self.out_dir is not None:
            return load_run(self.out_dir)
        raise ValueError("this run kept no events: simulate with keep_events=True or with an out_dir")

    def __repr__(self) -> str:
        s = self.summary
        return (f"RunResult(run_id={s['run_id']!r}, events={s['events']}, checks_ok={s['checks']['ok']}, "
                f"out_dir={str(self.out_dir) if self.out_dir else None!r})")

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


class SummarySink:
    """Collects the headline numbers of a run while it is recorded (constant memory)."""

    def __init__(self):
        self.allocations = 0
        self.handed_out = 0
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.client_answers = 0
        self.kill: tuple[str, float] | None = None
        self.new_active: tuple[str, float] | None = None
        self.last_recv_before_kill: float | None = None
        self.first_recv_after_kill: float | None = None

    def write(self, row: dict) -> None:
        """Account for one row."""
        kind = row["kind"]
        if kind == "rootcoord.alloc_timestamp" and row["error"] is None:
            self.allocations += 1
            self.handed_out += row["count"]
            if self.first_ts is None:
                self.first_ts = row["ts"]
            self.last_ts = row["ts"] + row["count"] - 1
        elif kind == "client.recv":
            self.client_answers += 1
            if self.kill is None:
                self.last_recv_before_kill = row["t_ms"]
            elif self.first_recv_after_kill is None and row["t_ms"] > self.kill[1]:
                self.first_recv_after_kill = row["t_ms"]
        elif kind == "fault.kill" and self.kill is None:
            self.kill = (row["node"], row["t_ms"])
        elif kind == "session.active" and self.kill is not None and self.new_active is None:
            self.new_active = (row["node"], row["t_ms"])

    def close(self) -> None:
        """Nothing to release."""

    def failover(self) -> dict | None:
        """Who died when, who took over when, and the longest silence any client saw."""
        if self.kill is None:
            return None
        gap = None
        if self.first_recv_after_kill is not None and self.last_recv_before_kill is not None:
            gap = round(self.first_recv_after_kill - self.last_recv_before_kill, 3)
        return {
            "killed": self.kill[0],
            "killed_at_ms": self.kill[1],
            "new_active": self.new_active[0] if self.new_active else None,
            "new_active_at_ms": self.new_active[1] if self.new_active else None,
            "client_gap_ms": gap,
        }


def simulate(
    scenario: str,
    seed: int = 1,
    duration_s: float | None = None,
    out_dir: str | os.PathLike | None = None,
    force: bool = False,
    switches: BugSwitches | list[str] | str | None = None,
    keep_events: bool = True,
    network: NetworkParams | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> RunResult:
    """Simulate ``scenario`` with ``seed`` for ``duration_s`` simulated seconds (the scenario's default).

    * ``out_dir``: write the run folder (``events.parquet``, ``events.jsonl``, ``summary.json``);
      an existing non-empty folder needs ``force`` (only the run's own files are replaced).
    * ``keep_events``: keep the rows in memory too (``result.events``). With ``keep_events=False``
      memory stays bounded however long the run: rows stream to the files and the checkers and
      summary read them as they pass.
    * ``switches``: bug switches to turn on, by name (one string or a list) or a :class:`BugSwitches`.
    * ``network``: latency and loss model; ``progress(done_s, total_s)`` is called as the run advances.

    Raises ``ValueError`` for an unknown scenario or switch, a bad seed or duration, and
    :class:`RunFolderError` for an unusable ``out_dir``.
    """
    spec = get_scenario(scenario)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
    if duration_s is None:
        duration_s = spec.duration_s
    if not (isinstance(duration_s, (int, float)) and 0 < duration_s < float("inf")):
        raise ValueError(f"duration must be a positive number of seconds, got {duration_s!r}")
    if isinstance(switches, BugSwitches):
        sw = switches
    else:
        sw = BugSwitches.from_names([switches] if isinstance(switches, str) else list(switches or []))
    config = Config(switches=sw)
    run_id = f"{scenario}-s{seed}" + "".join(f"+{n}" for n in sw.enabled())
    out = prepare_out_dir(out_dir, force) if out_dir is not None else None

    memory = MemorySink()
    checker = TSOChecker()
    stats = SummarySink()
    sinks: list = ([memory] if keep_events else []) + [checker, stats]
    meta = {"scenario": scenario, "seed": str(seed), "duration_s": repr(float(duration_s)),
            "switches": ",".join(sw.enabled())}
    if out is not None:
        sinks += [ParquetSink(out / "events.parquet", metadata=meta), JsonlSink(out / "events.jsonl")]
    recorder = Recorder(run_id, sinks=sinks)
    sim = Simulation(seed, recorder, config, network)
    recorder.emit("run.start", "sim", detail={"scenario": scenario, "seed": seed, "duration_s": duration_s,
                                              "switches": sw.enabled(), "version": __version__})
    spec.build(sim)
    total_ms = duration_s * 1000.0
    if progress is None:
        sim.run(total_ms)
    else:
        steps = 50
        for i in range(1, steps + 1):
            sim.run(total_ms * i / steps)
            progress(duration_s * i / steps, duration_s)
    recorder.emit("run.end", "sim", detail={"events": recorder.seq + 1})
    recorder.close()

    summary = _summary(spec, seed, duration_s, config, recorder, stats, checker, run_id)
    if out is not None:
        with open(out / "summary.json", "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
            fh.write("\n")
    return RunResult(summary, out, memory.rows if keep_events else [], kept=keep_events)


def _summary(spec, seed, duration_s, config, recorder, stats: SummarySink, checker: TSOChecker, run_id) -> dict:
    violations = checker.result()
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
            "allocations": stats.allocations,
            "timestamps_handed_out": stats.handed_out,
            "window_saves": int(recorder.counts.get("tso.save", 0)),
            "client_answers": stats.client_answers,
            "client_errors": int(recorder.counts.get("client.error", 0)),
            "first_ts": stats.first_ts,
            "first_ts_text": ts_text(stats.first_ts) if stats.first_ts is not None else None,
            "last_ts": stats.last_ts,
            "last_ts_text": ts_text(stats.last_ts) if stats.last_ts is not None else None,
        },
        "failover": stats.failover(),
        "checks": {
            "ok": not violations,
            "invariants": list(INVARIANTS),
            "violation_counts": dict(checker.counts),
            "violations": [v.to_dict() for v in violations],
            "violations_kept_per_invariant": checker.limit,
        },
    }
