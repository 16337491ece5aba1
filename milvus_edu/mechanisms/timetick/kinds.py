"""The TimeTick mechanism's event kinds: proxy queue statistics, ticker, reports, rootcoord's sync,
messages produced to pchannels and the tt-aligned packs consumers receive."""

from __future__ import annotations

from ...events.schema import kind
from ...proto import MsgType

#: The DML message types (``msg_type`` of an ``mq.produce``) whose order the lesson follows; the rest are time ticks
#: and DDL.
DML_TYPES = (MsgType.INSERT, MsgType.DELETE)

KINDS = (
    kind("proxy.enqueue", "A DML task entered the proxy's queue: its timestamp `ts`, the pchannel `channel` it "
         "writes to (one row per pchannel), `count` rows there, and the pchannel statistics after it.",
         "ts count channel min_ts max_ts detail", "dmTaskQueue.Enqueue / commitPChanStats"),
    kind("proxy.finish", "A DML task finished (its messages are in the pchannel): its statistics are popped; "
         "`min_ts`/`max_ts` after it (null when the pchannel has no task left).",
         "ts channel min_ts max_ts detail", "dmTaskQueue.PopActiveTask / popPChanStats"),
    kind("proxy.tick", "The proxy's channelsTimeTicker ran: `ts` is the timestamp it allocated (the default), "
         "`tick_ts` its minimum; `detail` holds each pchannel's reported value and `currents` gate.",
         "ts tick_ts detail", "channelsTimeTickerImpl.tick"),
    kind("proxy.report", "The proxy sent UpdateChannelTimeTick to rootcoord: `ts` is DefaultTimestamp, `detail` "
         "the per-pchannel values, `count` how many pchannels it lists.",
         "ts count peer detail", "Proxy.sendChannelsTimeTickLoop"),
    kind("proxy.ticker_start", "The proxy's channels ticker started (`ts`: the timestamp it started from); `detail` "
         "gives the phases of its two loops' tickers, in ms after this event: `tick_phase_ms` (tickLoop) and "
         "`report_phase_ms` (sendChannelsTimeTickLoop).", "ts detail",
         "channelsTimeTickerImpl.start / Proxy.sendChannelsTimeTickLoop"),
    kind("rootcoord.ticker_start", "Rootcoord's timetick loops started; `detail.sync_ts_phase_ms` is how long before "
         "each startTimeTickLoop tick syncTsLoop ticks: the age of the DDL minimum when it is sent.", "detail",
         "scheduler.syncTsLoop / Core.startTimeTickLoop"),
    kind("rootcoord.timetick_update", "Rootcoord took a report from `peer` (a proxy, or `ddl` for its own DDL "
         "minimum): `ts` is its default, `detail.channels` its per-pchannel values; `detail.sent` says whether "
         "every session had now reported, so a round of ticks went out.", "ts peer error detail",
         "timetickSync.updateTimeTick / sendToChannel"),
    kind("rootcoord.session_add", "Rootcoord's timetick sync started waiting for a proxy's reports.", "peer",
         "timetickSync.addSession"),
    kind("rootcoord.session_del", "Rootcoord's timetick sync stopped waiting for a proxy (its session is gone).",
         "peer", "timetickSync.delSession"),
    kind("mq.produce", "A message was appended to pchannel `channel` with id `msg_id`: DML (`vchannel`, `count` rows, "
         "`begin_ts`..`end_ts`, `ts` = end; an insert's `segment`) or a TimeTick (`tick_ts`, written by rootcoord).",
         "ts channel vchannel msg_id msg_type begin_ts end_ts count tick_ts segment detail",
         "msgstream.Produce / Broadcast; timetickSync.sendTimeTickToChannel"),
    kind("mq.pack", "A consumer received the tt-aligned pack (`begin_ts`, `end_ts`] of `vchannel`: `count` "
         "messages; `msg_id` is where its end position points.",
         "channel vchannel msg_id begin_ts end_ts tick_ts count", "MqTtMsgStream.bufMsgPackToChannel / Dispatcher"),
    kind("mq.consume", "One message of a pack, as the consumer of `vchannel` received it (`tick_ts` = the pack's end).",
         "ts channel vchannel msg_id msg_type tick_ts", "Dispatcher.groupingMsgs"),
)
