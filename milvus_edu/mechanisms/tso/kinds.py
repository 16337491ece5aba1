"""The TSO mechanism's event kinds: timestamp oracle, rootcoord's AllocTimestamp, sessions, clients."""

from __future__ import annotations

from ...events.schema import kind

KINDS = (
    kind("tso.init", "A rootcoord initialised its timestamp oracle from the saved window.",
         "physical_ms logical window_end_ms clock_ms detail", "timestampOracle.InitTimestamp"),
    kind("tso.save", "The TSO window end was saved to the KV.", "window_end_ms clock_ms", "timestampOracle.saveTimestamp"),
    kind("tso.save_failed", "Saving the window failed; the TSO state is unchanged.", "error clock_ms",
         "timestampOracle.saveTimestamp"),
    kind("tso.update", "tsLoop advanced the physical part; logical restarts at 0.",
         "physical_ms logical window_end_ms clock_ms detail", "timestampOracle.UpdateTimestamp"),
    kind("tso.alloc", "GenerateTSO reserved `count` timestamps; `ts` is the last of the batch.",
         "ts count physical_ms logical window_end_ms clock_ms", "GlobalTSOAllocator.GenerateTSO"),
    kind("tso.alloc_retry", "GenerateTSO had to wait (not initialised, or logical overflow).",
         "count physical_ms logical error", "GlobalTSOAllocator.GenerateTSO"),
    kind("tso.alloc_failed", "GenerateTSO gave up.", "count error", "GlobalTSOAllocator.GenerateTSO"),
    kind("tso.set", "SetTSO moved the window forward to a user timestamp.",
         "ts physical_ms logical window_end_ms error", "timestampOracle.ResetUserTimestamp"),
    kind("tso.reset", "ResetTimestamp set the physical part to now.", "physical_ms logical clock_ms",
         "timestampOracle.ResetTimestamp"),
    kind("rootcoord.alloc_timestamp", "RootCoord answered AllocTimestamp; `ts` is the FIRST ts of the batch.",
         "ts count peer error", "Core.AllocTimestamp"),
    kind("session.register", "A coordinator registered its session and lease.", "detail", "Session.Register"),
    kind("session.active", "A coordinator won the ACTIVE key and became active.", "active detail",
         "Session.ProcessActiveStandBy"),
    kind("session.standby", "A coordinator found an ACTIVE key and waits as standby.", "active",
         "Session.ProcessActiveStandBy"),
    kind("session.lost", "A lease expired; its keys vanished from the KV.", "active detail", "etcd lease expiry"),
    kind("session.keepalive", "A coordinator's lease keep-alive was answered; the lease runs for another TTL.",
         "detail", "etcd clientv3 KeepAlive / Session.processKeepAliveResponse"),
    kind("session.keepalive_failed", "A keep-alive request failed (etcd unreachable or the lease is gone).",
         "error detail", "Session.processKeepAliveResponse"),
    kind("session.exit", "A process exits: a coordinator that lost its session or its ACTIVE key, or whose "
         "activation failed; a proxy whose session lease ran out.",
         "active detail", "Session.LivenessCheck / ProcessActiveStandBy (os.Exit, panic)"),
    kind("client.request", "A client sent a request.", "count peer", "-"),
    kind("client.recv", "A client received a timestamp answer.", "ts count peer", "-"),
    kind("client.error", "A client's request failed (timeout, no active rootcoord, RPC error).", "peer error", "-"),
)
