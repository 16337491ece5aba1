"""What the explorer sends to the browser once: a run log as compact column arrays.

Every event is a few numbers (its time, the lane it is drawn on, the node whose program it belongs to, its kind,
its channel); messages are pairs of events; watermarks are (event, value) points per track; requests are slices
from one event to another. All of it is read off the mechanisms' trace items (:attr:`Mechanism.trace
<milvus_edu.registry.Mechanism.trace>`, the same declarations the Perfetto export draws): counters become
watermark tracks, begin/end pairs become request slices, flows become message arrows. No mechanism is named here.

The arrays travel as one little-endian byte string (:meth:`Payload.pack`) whose layout (name, type, offset,
length of each array) is in the JSON metadata, so the browser makes typed-array views without parsing anything.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..export.perfetto import Begin, Counter, End, FlowMatcher, row_items, rows, trace_mapping
from ..registry import mechanisms
from ..viz.columns import natural, short_channel, texts

#: Lanes are grouped by the component their node's name starts with, in the order a request travels (clients
#: first, the message queue's pchannels in the middle, the nodes that consume them after); unknown ones last.
LANE_ORDER = ("client", "proxy", "rootcoord", "pchannel", "datacoord", "datanode", "querynode", "etcd")
#: Events of the message queue (kinds with this prefix) are drawn on the lane of the pchannel they write.
QUEUE_PREFIX = "mq."
#: Kinds drawn as faults (a cross and a line across the diagram).
FAULT_PREFIX = "fault."

_DTYPES = {"f8": "<f8", "u4": "<u4", "i4": "<i4", "u2": "<u2", "u1": "u1"}


def _group(lane: str, is_channel: bool) -> int:
    if is_channel:
        return LANE_ORDER.index("pchannel")
    low = lane.lower()
    return next((i for i, p in enumerate(LANE_ORDER) if low.startswith(p)), len(LANE_ORDER))


@dataclass
class Payload:
    """A run log as the explorer's browser side reads it. Arrays are numpy; ``meta`` is plain JSON.

    Per event (``n``): ``t`` (ms), ``lane``, ``node`` (program order), ``kind``, ``chan`` (index into
    ``channels``, 0 for none). Per message: ``fsend``, ``frecv`` (event positions, in receive order), ``fname``.
    Per watermark point: ``ctrack``, ``cseq``, ``cval`` (ms), sorted by track then event. Per request slice:
    ``sbegin``, ``send`` (the end event, ``n`` for one never finished), ``slane``, ``sname``.
    """

    arrays: dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)

    def pack(self) -> tuple[bytes, dict]:
        """The arrays as one byte string, each at an offset that is a multiple of 8, and the metadata with their
        layout added (``layout``: name -> [type, offset, length])."""
        chunks, layout, offset = [], {}, 0
        for name, arr in self.arrays.items():
            code = next(c for c, d in _DTYPES.items() if np.dtype(d) == arr.dtype)
            raw = np.ascontiguousarray(arr).tobytes()
            layout[name] = [code, offset, int(arr.size)]
            pad = (-len(raw)) % 8
            chunks += [raw, b"\0" * pad]
            offset += len(raw) + pad
        return b"".join(chunks), {**self.meta, "layout": layout}


def build_payload(frame: pd.DataFrame) -> Payload:
    """The explorer's arrays for ``frame`` (a run log in ``seq`` order, positions ``0..n-1``)."""
    n = len(frame)
    kinds = frame["kind"].astype(str).to_numpy()
    nodes = frame["node"].astype(str).to_numpy()
    channel = texts(frame, "channel")
    vchannel = texts(frame, "vchannel")
    queued = np.char.startswith(kinds.astype(str), QUEUE_PREFIX) & (channel != "")
    lane_name = np.where(queued, channel, nodes).astype(object)

    lane_keys = dict.fromkeys(lane_name[queued], True)  # name -> whether it is a pchannel's lane
    for name in dict.fromkeys(nodes):
        lane_keys.setdefault(name, False)
    lanes = sorted(lane_keys, key=lambda name: (_group(name, lane_keys[name]), natural(name)))
    lane_index = {name: i for i, name in enumerate(lanes)}
    node_names = sorted(dict.fromkeys(nodes), key=natural)
    node_index = {name: i for i, name in enumerate(node_names)}
    kind_names = sorted(dict.fromkeys(kinds))
    kind_index = {k: i for i, k in enumerate(kind_names)}
    chan_full = np.where(vchannel != "", vchannel, channel)
    chan_names = [""] + sorted({c for c in dict.fromkeys(chan_full) if c}, key=natural)
    chan_index = {c: i for i, c in enumerate(chan_names)}

    arrays = {
        "t": frame["t_ms"].to_numpy(dtype=float, na_value=0.0).astype("<f8"),
        "lane": pd.Series(lane_name).map(lane_index).to_numpy(dtype="<u2"),
        "node": pd.Series(nodes).map(node_index).to_numpy(dtype="<u2"),
        "kind": pd.Series(kinds).map(kind_index).to_numpy(dtype="<u2"),
        "chan": pd.Series(chan_full).map(chan_index).to_numpy(dtype="<u2"),
    }
    traced = _trace(frame, n)
    arrays.update(traced.pop("arrays"))
    lane_node = [node_index.get(name, -1) for name in lanes]
    meta = {
        "n": n,
        "run_id": str(frame["run_id"].iloc[0]) if "run_id" in frame and n else "",
        "lanes": [short_channel(name) if lane_keys[name] else name for name in lanes],
        "lane_full": lanes,
        "lane_is_channel": [lane_keys[name] for name in lanes],
        "lane_node": lane_node,
        "nodes": node_names,
        "kinds": kind_names,
        "fault_kinds": [i for i, k in enumerate(kind_names) if k.startswith(FAULT_PREFIX)],
        "channels": [short_channel(c) for c in chan_names],
        **traced,
    }
    return Payload(arrays, meta)


def _trace(frame: pd.DataFrame, n: int) -> dict:
    """Watermark tracks, request slices and messages from the mechanisms' trace items (only rows of kinds some
    mechanism maps are read; the others are plain instants)."""
    mapping = trace_mapping()
    owner = {kind: i for i, mech in enumerate(mechanisms()) for kind in mech.trace}
    mapped = frame[frame["kind"].isin(list(mapping))]
    matcher = FlowMatcher()
    flows: list[tuple[int, int, str]] = []
    points: dict[tuple, list[tuple[int, float]]] = {}
    track_rank: dict[tuple, int] = {}
    open_slices: dict[tuple, deque] = {}
    slices: list[list] = []  # [begin seq, end seq, process, name]
    for row in rows(mapped):
        seq = int(row["seq"])
        items = row_items(row, mapping)
        flows += [(send, seq, str(key[0])) for send, key in matcher.feed(seq, items)]
        for item in items:
            if isinstance(item, Counter):
                key = (item.process, item.name)
                points.setdefault(key, []).append((seq, float(item.value)))
                track_rank.setdefault(key, owner[row["kind"]])
            elif isinstance(item, Begin):
                entry = [seq, n, item.process, item.name]
                slices.append(entry)
                open_slices.setdefault(item.key, deque()).append(entry)
            elif isinstance(item, End) and open_slices.get(item.key):
                open_slices[item.key].popleft()[1] = seq
    tracks = sorted(points, key=lambda k: (track_rank[k], natural(k[1]), natural(k[0])))
    cseq, cval, ctrack, starts = [], [], [], []
    for i, key in enumerate(tracks):
        starts.append(len(cseq))
        pts = points[key]
        cseq += [p[0] for p in pts]
        cval += [p[1] for p in pts]
        ctrack += [i] * len(pts)
    starts.append(len(cseq))
    slices.sort(key=lambda s: s[0])
    names = sorted({s[3] for s in slices}, key=natural)
    name_index = {s: i for i, s in enumerate(names)}
    procs = sorted({s[2] for s in slices}, key=natural)
    proc_index = {p: i for i, p in enumerate(procs)}
    flow_names = sorted({f[2] for f in flows})
    flow_index = {s: i for i, s in enumerate(flow_names)}
    arrays = {
        "fsend": np.asarray([f[0] for f in flows], dtype="<u4"),
        "frecv": np.asarray([f[1] for f in flows], dtype="<u4"),
        "fname": np.asarray([flow_index[f[2]] for f in flows], dtype="u1"),
        "ctrack": np.asarray(ctrack, dtype="<u2"),
        "cseq": np.asarray(cseq, dtype="<u4"),
        "cval": np.asarray(cval, dtype="<f8"),
        "sbegin": np.asarray([s[0] for s in slices], dtype="<u4"),
        "send": np.asarray([s[1] for s in slices], dtype="<u4"),
        "sname": np.asarray([name_index[s[3]] for s in slices], dtype="<u4"),
        "sproc": np.asarray([proc_index[s[2]] for s in slices], dtype="<u2"),
    }
    return {
        "arrays": arrays,
        "tracks": [{"process": p, "name": _track_label(name)} for p, name in tracks],
        "track_starts": starts,
        "slice_names": names,
        "slice_procs": procs,
        "flow_names": flow_names,
    }


def _track_label(name: str) -> str:
    """A counter's name with its channel shortened (``tsafe by-dev-rootcoord-dml_0_100v0 (ms)`` -> ``tsafe
    dml_0_100v0``): the lane's label has little room."""
    words = [short_channel(w) if "dml_" in w else w for w in name.replace(" (ms)", "").split(" ")]
    return " ".join(words)


def causal_past(payload: Payload, seq: int) -> np.ndarray:
    """The events that could have influenced event ``seq`` (a boolean mask): ``seq`` itself, every earlier event
    of its node (program order), and, closed under both rules, every event that sent a message one of them
    received. The past on each node is a prefix of that node's events, so one backward sweep finds it: ``hi[node]``
    is the last event of the node in the past found so far."""
    a = payload.arrays
    node, fsend, frecv = a["node"], a["fsend"].astype(np.int64), a["frecv"].astype(np.int64)
    hi = np.full(int(node.max()) + 1 if len(node) else 0, -1, dtype=np.int64)
    hi[node[seq]] = seq
    k = int(np.searchsorted(frecv, seq, side="right")) - 1
    inside = np.zeros(len(node), dtype=bool)
    for i in range(seq, -1, -1):
        while k >= 0 and frecv[k] > i:
            k -= 1
        if i > hi[node[i]]:
            continue
        inside[i] = True
        while k >= 0 and frecv[k] == i:
            s = fsend[k]
            if s > hi[node[s]]:
                hi[node[s]] = s
            k -= 1
    return inside
