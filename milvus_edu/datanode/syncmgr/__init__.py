"""Sync manager: SyncTask, per-segment serial execution, the meta writer, binlog serialisation (``internal/flushcommon/syncmgr``)."""
