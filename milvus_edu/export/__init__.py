"""Exports of a run to other tools' formats: :func:`export_perfetto` writes Chrome/Perfetto trace-event JSON."""

from .perfetto import (Begin, Counter, End, ExportError, Flow, Instant, export_perfetto, flow_pairs, perfetto_trace,
                       ts_ms)

__all__ = ["Begin", "Counter", "End", "ExportError", "Flow", "Instant", "export_perfetto", "flow_pairs", "perfetto_trace",
           "ts_ms"]
