"""Exports of a run to other tools' formats: :func:`export_perfetto` writes Chrome/Perfetto trace-event JSON."""

from .perfetto import Begin, Counter, End, ExportError, Instant, export_perfetto, perfetto_trace, ts_ms

__all__ = ["Begin", "Counter", "End", "ExportError", "Instant", "export_perfetto", "perfetto_trace", "ts_ms"]
