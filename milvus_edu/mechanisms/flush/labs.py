"""Self-checks for ``notebooks/03_flush_checkpoint.ipynb`` (see :mod:`milvus_edu.labs.feedback`).

Every check judges the answer against the run the notebook made (its log, or its binlogs on disk), never against a
number written into this file, so it stays right for any seed. Typical wrong answers (counting one binlog file
instead of all of the segment's, counting both vchannels, counting only the checkpoints DataCoord stored, counting
filter events instead of rows) get a message naming the mistake.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .check import INVARIANTS as INVARIANT_NAMES
from ...narrate import detail_dict, plural
from ...labs.feedback import Feedback, judge_integer, name_answer, right, shown, wrong
PK_FIELD = 100


# ---- Exercise 1 ---------------------------------------------------------------------------------
def segment_binlogs(run_dir, segment: int) -> list[Path]:
    """The insert binlogs of ``segment``'s primary-key field in the run folder's bucket, in log-id order."""
    bucket = Path(run_dir) / "objects" / "a-bucket" / "files" / "insert_log"
    return sorted(bucket.glob(f"*/*/{segment}/{PK_FIELD}/*"), key=lambda p: int(p.name))


def check_segment_rows(answer, run_dir, segment: int) -> Feedback:
    """Exercise: how many rows ``segment``'s binlogs hold (every insert binlog of its primary-key field)."""

    def judge(value: int) -> Feedback:  # reads the run only for an answer that is a number
        files = segment_binlogs(run_dir, segment)
        sizes = [len(pd.read_parquet(f)) for f in files]
        want = sum(sizes)
        insert_log = Path(run_dir, "objects", "a-bucket", "files", "insert_log")
        every_field = sum(len(pd.read_parquet(f)) for f in insert_log.glob(f"*/*/{segment}/*/*"))
        every_segment = sum(len(pd.read_parquet(f)) for f in insert_log.glob(f"*/*/*/{PK_FIELD}/*"))
        if value == want:
            return right(f"Right: {plural(len(files), 'binlog file')} of field {PK_FIELD}, {want:,} rows. Each sync of the "
                         f"segment wrote one more file; together they are the segment.")
        if sizes and value in sizes and len(sizes) > 1:
            return wrong(f"That is one file. The segment was synced {len(sizes)} times, and each sync wrote its own "
                         f"binlog: add up every file under .../{segment}/{PK_FIELD}/.")
        if value == every_field and every_field != want:
            return wrong("That counts the binlogs of every field. Each field (the primary key, the timestamps, ...) "
                         f"has its own files with the same rows; count one field's, {PK_FIELD}.")
        if value == every_segment and every_segment != want:
            return wrong(f"That counts every segment's binlogs: the rows of the whole run. Keep only segment "
                         f"{segment}'s folder, .../{segment}/{PK_FIELD}/.")
        if value == len(files) and len(files) != want:
            return wrong("That is the number of files (one per sync of the segment). The question is how many "
                         "rows they hold: read each with pandas.read_parquet and add up their lengths.")
        return wrong(f"{value:,} is not it. Read every file in the segment's insert_log/.../{segment}/{PK_FIELD}/ "
                     "folder with pandas.read_parquet and add up their lengths.")

    return judge_integer(answer, "an int: a number of rows", judge, timestamp=False)


# ---- Exercise 2 ---------------------------------------------------------------------------------
def open_flush_updates(events: pd.DataFrame, vchannel: str) -> tuple[int, int, int, int, int]:
    """While ``vchannel``'s first flushTs stays set: ``(positions sent, of them stored, on every vchannel,
    the set event's position, the position where it ended)``.

    The window runs from the ``datanode.flush_ts`` row that set it to the next one of the vchannel (cleared, or
    replaced by a later flush), or to the end of the log; the count is DataCoord's ``datacoord.channel_cp`` rows
    for the vchannel from the DataNode (not ``WatchChannels``).
    """
    flush = events[(events["kind"] == "datanode.flush_ts") & (events["vchannel"] == vchannel)]
    start = int(flush["seq"].iloc[0])
    later = flush[flush["seq"] > start]
    end = int(later["seq"].iloc[0]) if len(later) else int(events["seq"].max()) + 1
    cps = events[(events["kind"] == "datacoord.channel_cp") & (events["seq"] > start) & (events["seq"] < end)
                 & (events["peer"] != "WatchChannels") & events["error"].isna()]
    mine = cps[cps["vchannel"] == vchannel]
    stored = int(mine["detail"].map(lambda d: bool(detail_dict(d).get("saved"))).sum())
    return len(mine), stored, len(cps), start, end


def check_open_flush_updates(answer, events: pd.DataFrame, vchannel: str) -> Feedback:
    """Exercise: how many checkpoint positions of ``vchannel`` reached DataCoord while its first flushTs was set."""

    def judge(value: int) -> Feedback:  # reads the run only for an answer that is a number
        want, stored, both, start, end = open_flush_updates(events, vchannel)
        if value == want:
            return right(f"Right: {want:,} positions in that window, only {stored} of them "
                         "stored. The checkpoint sat exactly on flushTs, so `cp >= flushTs` kept the flush path "
                         "sending it on every pack, and `cp > flushTs` never cleared flushTs: the DataNode kept "
                         "asking until a later flush replaced it.")
        if value == stored and stored != want:
            return wrong("Those are only the ones DataCoord stored. Count every position it received for the "
                         "vchannel, the ignored ('not newer') ones too: each is one the DataNode sent.")
        if value == both and both != want:
            return wrong(f"That counts both vchannels. Take only the rows whose vchannel is {vchannel}.")
        return wrong(f"{value:,} is not it. Count the datacoord.channel_cp rows with vchannel {vchannel}, no error "
                     f"and a peer other than WatchChannels, between event {start + 1:,} (flushTs set) and event "
                     f"{end + 1:,} (the vchannel's next datanode.flush_ts row).")

    return judge_integer(answer, "an int: a number of positions", judge, timestamp=False)


# ---- Exercise 3 ---------------------------------------------------------------------------------
def filtered_rows(events: pd.DataFrame) -> tuple[int, int]:
    """``(rows, events)`` the restarted DataNode's ddNode filtered as already in binlogs (``datanode.filter``)."""
    f = events[events["kind"] == "datanode.filter"]
    return int(f["count"].sum()), len(f)


def check_filtered_rows(answer, events: pd.DataFrame) -> Feedback:
    """Exercise: how many replayed insert rows the restarted DataNode dropped as already flushed."""

    def judge(value: int) -> Feedback:  # reads the run only for an answer that is a number
        rows, messages = filtered_rows(events)
        acked = int(events.loc[(events["kind"] == "client.insert") & events["error"].isna(), "count"].sum())
        if value == rows:
            return right(f"Right: {rows:,} rows in {messages:,} insert messages were at or before their segment's "
                         "DmlPosition, so already in a binlog. Without the filter they would be written twice.")
        if value == messages and messages != rows:
            return wrong("That counts datanode.filter events: one per insert message. Each message holds 1 to 8 "
                         "rows; add up their `count`.")
        if value == acked:
            return wrong("That is every acknowledged row. Only the replayed rows already in binlogs were filtered.")
        return wrong(f"{value:,} is not it. Add up the `count` of the datanode.filter rows.")

    return judge_integer(answer, "an int: a number of rows", judge, timestamp=False)


# ---- Exercise 4 ---------------------------------------------------------------------------------
def check_recovery_invariant(answer) -> Feedback:
    """Exercise (a prediction, made before the run that shows it): which invariant ``skip_recovery_filter`` breaks."""
    names = ", ".join(f"'{n}'" for n in INVARIANT_NAMES)
    a, verdict = name_answer(answer, INVARIANT_NAMES)
    if verdict is not None:
        return verdict
    if a == "durable":
        return right("Right: the checkpoint and the flushes are all fine; the binlogs end with rows twice, each named "
                     "by primary key and segment. Recovery needs both: seek to the checkpoint AND filter.")
    if a.replace("-", "") in ("checkpointsafe", "checkpointmonotonic"):
        return wrong("The checkpoints are fine: the restarted node seeks to the stored one, which is safe. What goes "
                     "wrong is what it does with the rows it replays from there.")
    if a in ("flush-completes", "checkpoint-advances"):
        return wrong(f"'{a}' is about progress, and the restarted node makes progress: it replays and flushes. Ask "
                     "what the rows it replays end up as in the binlogs.")
    if a in INVARIANT_NAMES:
        return wrong(f"'{a}' holds in that run. Think about what the final audit finds in the binlogs, then run "
                     "the next cell.")
    if "filter" in a or "skip" in a:
        return wrong(f"{shown(answer)} is the bug switch; name the invariant (checker) it breaks: one of {names}.")
    return wrong(f"{shown(answer)} is not an invariant name; answer with one of {names}.")
