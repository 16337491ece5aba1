"""Draw the design overview's two pictures from the package's layout: book/images/cluster.svg and layers.svg.

Run from the repository root after moving a module, renaming a node or adding a package::

    python book/draw_diagrams.py

* The cluster picture is drawn from :data:`BOXES` and :data:`ARROWS`: every box names the simulated node that runs
  it (``cluster/...``) and the pure modules inside it; ``tests/test_design_overview.py`` checks that each path exists
  and that the committed SVG shows every label, so a moved module fails a test until the picture is redrawn.
* The layers picture is drawn from :data:`LAYERS` and the package's real imports (:func:`imports`, read with
  ``ast``): each band lists the layers it imports. The test checks that every top-level module of ``milvus_edu/``
  sits in exactly one layer and that no import points up.

Matplotlib only (no graphviz); the SVGs are byte-for-byte reproducible on one matplotlib version (fixed hash salt,
no date), so redrawing an unchanged layout changes no file.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "milvus_edu"
IMAGES = Path(__file__).resolve().parent / "images"


# ---- the cluster --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """A pure component inside a box: what it does, and its module (a path under ``milvus_edu/``)."""

    label: str
    module: str


@dataclass(frozen=True)
class Box:
    """One Milvus process (or service) of the simulated cluster, at ``(x, y)`` (its lower left corner).

    ``nodes`` are the simulated nodes that run it, as ``path: Class`` with the path under ``milvus_edu/``.
    """

    key: str
    title: str
    x: float
    y: float
    w: float
    h: float
    nodes: tuple[str, ...]
    parts: tuple[Part, ...]
    colour: str


@dataclass(frozen=True)
class Arrow:
    """A call or a flow between two boxes: ``rpc`` (a simulated RPC, with latency and faults), ``stream`` (messages
    through the message queue) or ``store`` (reads and writes of etcd or the object store). ``start``/``end`` are
    points on the boxes' edges as fractions of their width and height; ``bend`` curves the arrow."""

    src: str
    dst: str
    kind: str
    label: str
    start: tuple[float, float]
    end: tuple[float, float]
    bend: float = 0.0
    label_at: tuple[float, float] | None = None


COORD = "#e8eef7"
WORKER = "#eaf4ea"
SERVICE = "#f4efe4"
CLIENT = "#f2f2f2"

BOXES: tuple[Box, ...] = (
    Box("clients", "Clients", 2, 76, 28, 27, ("cluster/client.py: SimClient", "cluster/rootcoord.py: TSOClient"), (
        Part("guarantee ts, session cache", "client/ts_utils.py"),
        Part("workload steps (MilvusClient)", "client/workload.py"),
        Part("collection cache + retry", "client/collection_cache.py"),
    ), CLIENT),
    Box("proxy", "Proxies", 42, 76, 34, 27, ("cluster/dml.py: ProxyNode", "cluster/querynode.py: ReadProxy"), (
        Part("DML queue, pchannel stats", "proxy/task_scheduler.py"),
        Part("channels time ticker", "proxy/channels_time_ticker.py"),
        Part("guarantee ts per level", "proxy/guarantee_ts.py"),
        Part("collection meta cache", "proxy/meta_cache.py"),
        Part("shard hash", "mq/hash.py"),
    ), COORD),
    Box("rootcoord", "RootCoord", 90, 74, 36, 29, ("cluster/rootcoord.py: RootCoordNode",
                                                    "cluster/dml.py: RootCoordTimeTick",
                                                    "cluster/catalog.py: Catalog"), (
        Part("TSO allocator", "tso/global_allocator.py"),
        Part("timestamp oracle, saved window", "tso/tso.py"),
        Part("AllocTimestamp, tsLoop", "rootcoord/root_coord.py"),
        Part("timetick sync", "rootcoord/timeticksync.py"),
        Part("DDL minimum ts", "rootcoord/scheduler.py"),
        Part("active/standby session", "sessionutil/__init__.py"),
    ), COORD),
    Box("etcd", "etcd (meta KV)", 138, 46, 25, 21, ("sim/kernel.py: Simulation.lease_reaper",), (
        Part("KV, txn, leases", "storage/kv.py"),
        Part("DataCoord catalog keys", "datacoord/catalog.py"),
    ), SERVICE),
    Box("mq", "Message queue: pchannels by-dev-rootcoord-dml_<i>, vchannels on them", 2, 51, 124, 16,
        ("cluster/consumer.py: PackConsumer", "cluster/dml.py: ConsumerNode"), (
            Part("pchannel logs, positions", "mq/broker.py"),
            Part("InsertMsg, DeleteMsg, TimeTick", "mq/msg.py"),
            Part("channel names", "mq/names.py"),
            Part("tt-aligned packs", "mq/msgstream.py"),
            Part("dispatcher per pchannel", "mq/dispatcher.py"),
        ), SERVICE),
    Box("datacoord", "DataCoord", 62, 23, 29, 22, ("cluster/data.py: DataCoordNode",), (
        Part("SaveBinlogPaths, Flush", "datacoord/services.py"),
        Part("segments, checkpoints", "datacoord/meta.py"),
        Part("recovery position", "datacoord/handler.py"),
        Part("segment assignment", "datacoord/segment_manager.py"),
    ), COORD),
    Box("datanode", "DataNode", 2, 2, 40, 40, ("cluster/data.py: DataNodeNode",), (
        Part("flowgraph: dd, write, tt nodes", "datanode/pipeline.py"),
        Part("write buffer per vchannel", "datanode/writebuffer/write_buffer.py"),
        Part("sync policies", "datanode/writebuffer/sync_policy.py"),
        Part("sync manager", "datanode/syncmgr/sync_manager.py"),
        Part("sync task: binlogs, then meta", "datanode/syncmgr/task.py"),
        Part("checkpoint updater", "datanode/checkpoint_updater.py"),
        Part("segment metacache", "datanode/metacache.py"),
    ), WORKER),
    Box("objects", "Object store (MinIO)", 62, 1, 29, 19, ("cluster/control_plane.py: RunStore",
                                                         "cluster/data.py: ObjectStoreLatency"), (
        Part("bucket on pyarrow.fs", "storage/objectstore.py"),
        Part("binlog paths", "storage/binlog.py"),
        Part("Parquet binlogs", "datanode/syncmgr/storage_serializer.py"),
    ), SERVICE),
    Box("querynode", "QueryNode", 106, 2, 57, 28, ("cluster/querynode.py: QueryNodeNode",), (
        Part("pipeline: filter, insert, delete", "querynode/pipeline.py"),
        Part("delegator: tsafe, waitTSafe", "querynode/delegator.py"),
        Part("excluded segments", "querynode/exclude_info.py"),
        Part("segcore MVCC", "querynode/segcore.py"),
    ), WORKER),
)

ARROWS: tuple[Arrow, ...] = (
    Arrow("clients", "proxy", "rpc", "insert, delete,\nsearch, query", (1.0, 0.55), (0.0, 0.55),
          label_at=(36, 95)),
    Arrow("clients", "rootcoord", "rpc", "AllocTimestamp (TSO clients); CreateCollection, DropCollection",
          (0.5, 1.0), (0.3, 1.0), bend=-0.15, label_at=(58, 109.5)),
    Arrow("proxy", "rootcoord", "rpc", "AllocTimestamp,\nUpdateChannel-\nTimeTick", (1.0, 0.55), (0.0, 0.55),
          label_at=(83, 96)),
    Arrow("rootcoord", "etcd", "store", "TSO window,\nsession lease", (1.0, 0.3), (0.5, 1.0), label_at=(147, 76)),
    Arrow("proxy", "mq", "stream", "InsertMsg, DeleteMsg", (0.25, 0.0), (0.405, 1.0), label_at=(51, 71.5)),
    Arrow("rootcoord", "mq", "stream", "TimeTick into every pchannel", (0.3, 0.0), (0.81, 1.0),
          label_at=(104, 71.5)),
    Arrow("mq", "datanode", "stream", "a pack per tick round", (0.15, 0.0), (0.46, 1.0), label_at=(29, 47.5)),
    Arrow("mq", "querynode", "stream", "a pack per tick round", (0.95, 0.0), (0.3, 1.0), label_at=(124, 43)),
    Arrow("datanode", "objects", "store", "binlogs", (1.0, 0.2), (0.0, 0.35), label_at=(52, 10.5)),
    Arrow("datanode", "datacoord", "rpc", "SaveBinlogPaths,\nUpdateChannel-\nCheckpoint", (1.0, 0.85),
          (0.0, 0.65), label_at=(52, 38)),
    Arrow("datacoord", "datanode", "rpc", "FlushChannels", (0.0, 0.2), (1.0, 0.6), label_at=(52, 24)),
    Arrow("clients", "datacoord", "rpc", "Flush,\nGetFlushState", (0.8, 0.0), (0.25, 1.0), label_at=(55, 48.5)),
    Arrow("datacoord", "etcd", "store", "segments, checkpoints", (1.0, 0.8), (0.0, 0.3), label_at=(114, 46)),
    Arrow("proxy", "querynode", "rpc", "Search, Query\n(guarantee ts)", (0.95, 0.0), (0.08, 1.0),
          label_at=(101, 36)),
    Arrow("objects", "querynode", "store", "load sealed\n(handoff)", (1.0, 0.5), (0.0, 0.3), label_at=(98.5, 13)),
)

STYLES = {"rpc": dict(color="#1f4e9a", linestyle="-"), "stream": dict(color="#b3501c", linestyle="--"),
          "store": dict(color="#4d4d4d", linestyle=":")}
KIND_NAMES = {"rpc": "RPC (latency, faults)", "stream": "message stream", "store": "KV / object store access"}


def _point(box: Box, at: tuple[float, float]) -> tuple[float, float]:
    return box.x + at[0] * box.w, box.y + at[1] * box.h


def draw_cluster(path: Path) -> None:
    """Draw the cluster picture into ``path`` (SVG or PNG by its suffix)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = _figure(16.5, 11.2)
    boxes = {box.key: box for box in BOXES}
    for box in BOXES:
        ax.add_patch(FancyBboxPatch((box.x, box.y), box.w, box.h, boxstyle="round,pad=0.4,rounding_size=1.2",
                                    facecolor=box.colour, edgecolor="#555555", linewidth=1.2, zorder=1))
        top = box.y + box.h - 2.2
        ax.text(box.x + 1.2, top, box.title, fontsize=10.5, fontweight="bold", va="center", zorder=4)
        wide = box.key == "mq"  # one band: its parts side by side
        for i, part in enumerate(box.parts):
            if wide:
                px, py = box.x + 1.2 + i * (box.w - 2) / len(box.parts), top - 5.2
            else:
                px, py = box.x + 1.2, top - 3.4 - 2.85 * i
            ax.text(px, py, part.label, fontsize=7.6, va="center", zorder=4)
            ax.text(px, py - (2.6 if wide else 1.25), part.module, fontsize=6.4, va="center", color="#1a5e20",
                    family="monospace", zorder=4)
        for j, node in enumerate(box.nodes):
            ax.text(box.x + 1.2, box.y + 1.2 + 1.9 * (len(box.nodes) - 1 - j), node, fontsize=6.6, va="center",
                    style="italic", color="#6a2c70", zorder=4)
    for arrow in ARROWS:
        a, b = _point(boxes[arrow.src], arrow.start), _point(boxes[arrow.dst], arrow.end)
        style = STYLES[arrow.kind]
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=13, linewidth=1.5,
                                     connectionstyle=f"arc3,rad={arrow.bend}", zorder=3, **style))
        lx, ly = arrow.label_at or ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
        ax.text(lx, ly, arrow.label, fontsize=7.2, ha="center", va="center", color=style["color"], zorder=5,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.9))
    for i, (kind, name) in enumerate(KIND_NAMES.items()):
        y = 100 - 4 * i
        ax.plot([138, 144], [y, y], linewidth=1.5, **STYLES[kind])
        ax.text(145, y, name, fontsize=7.8, va="center")
    ax.text(138, 88, "italic: the simulated node\n(milvus_edu/cluster/; etcd's:\nthe kernel's lease reaper)", fontsize=7.8, va="center",
            style="italic", color="#6a2c70")
    ax.text(138, 82, "monospace: the pure\nmodule (milvus_edu/)", fontsize=7.8, va="center", color="#1a5e20",
            family="monospace")
    ax.set_xlim(0, 165)
    ax.set_ylim(0, 112)
    _save(fig, path)
    plt.close(fig)


# ---- the layers ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layer:
    """A layer of the package: its name, what it is, and its top-level modules (names under ``milvus_edu/``)."""

    name: str
    role: str
    units: tuple[str, ...]


#: Bottom first: a layer may import its own and lower layers only.
LAYERS: tuple[Layer, ...] = (
    Layer("contract", "the run log's schema and recorder, parameters and switches, hybrid timestamps, effects",
          ("events", "registry", "config", "tsoutil", "proto", "merr", "effects", "clock", "version")),
    Layer("components", "pure models of Milvus's Go packages: no SimPy, no widgets, no Spark",
          ("tso", "rootcoord", "sessionutil", "proxy", "mq", "datanode", "datacoord", "querynode", "storage",
           "client")),
    Layer("kernel", "the SimPy simulation kernel (clocks, network, faults, runs, run tokens, replay and forks), live mode",
          ("sim", "live")),
    Layer("cluster", "simulated nodes, one per Milvus component, over one node base; one cluster builder",
          ("cluster",)),
    Layer("readers", "read the run log only: checkers' base, narration, causal chains, views, the explorer, trace "
          "export, Spark analyses, lab feedback", ("check", "narrate", "explain", "viz", "explorer", "export", "analysis",
                                                  "labs")),
    Layer("lessons", "one folder per mechanism: scenarios, checkers, views, labs, analyses (registered)",
          ("mechanisms",)),
    Layer("front door", "the command line, Spark sweeps, a real Milvus beside the model, milvus_edu.simulate",
          ("cli", "sweep", "real", "__init__")),
)


def units(package: Path = PACKAGE) -> list[str]:
    """The top-level modules of the package: its sub-packages and its ``.py`` files (``__init__`` included)."""
    found = [p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    found += [p.stem for p in package.glob("*.py")]
    return sorted(found)


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Which top-level modules each top-level module imports (read from the source with ``ast``). An import of a
    name defined in ``milvus_edu/__init__.py`` (``from milvus_edu import simulate``) counts as ``__init__``, except
    the package's version string, a constant every layer may stamp on what it writes."""
    known = set(units(package))
    edges: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        rel = path.relative_to(package.parent).with_suffix("").parts
        unit = rel[1] if len(rel) > 1 else "__init__"
        here = list(rel[:-1])  # the package the file is in
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                names = [module] if node.module else [f"{module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] != package.name or parts[1:] == ["__version__"]:
                    continue
                target = parts[1] if len(parts) > 1 and parts[1] in known else "__init__"
                if target != unit:
                    edges[unit].add(target)
    return dict(edges)


def layer_of(unit: str) -> int:
    """The index in :data:`LAYERS` of the layer holding ``unit``."""
    return next(i for i, layer in enumerate(LAYERS) if unit in layer.units)


def layer_imports(package: Path = PACKAGE) -> dict[int, set[int]]:
    """Which layers each layer imports (other than itself)."""
    out: dict[int, set[int]] = defaultdict(set)
    for unit, targets in imports(package).items():
        for target in targets:
            if layer_of(target) != layer_of(unit):
                out[layer_of(unit)].add(layer_of(target))
    return dict(out)


def draw_layers(path: Path) -> None:
    """Draw the layers picture into ``path``: one band per layer, top layer first, with the layers it imports."""
    import matplotlib.pyplot as plt

    uses = layer_imports()
    fig, ax = _figure(13, 0.95 * len(LAYERS) + 0.6)
    height = 1.0
    for i, layer in enumerate(LAYERS):
        y = i * (height + 0.25)
        ax.add_patch(plt.Rectangle((0, y), 100, height, facecolor=plt.cm.Blues(0.06 + 0.05 * i),
                                   edgecolor="#555555", linewidth=1))
        ax.text(1, y + 0.68, layer.name, fontsize=11, fontweight="bold", va="center")
        ax.text(16, y + 0.68, "  ".join(_unit_name(u) for u in layer.units), fontsize=8.6, va="center",
                family="monospace", color="#1a5e20")
        ax.text(16, y + 0.27, layer.role, fontsize=8.2, va="center")
        below = sorted(uses.get(i, ()), reverse=True)
        ax.text(99, y + 0.27, "imports: " + (", ".join(LAYERS[j].name for j in below) or "nothing"),
                fontsize=7.6, va="center", ha="right", style="italic", color="#6a2c70")
    ax.annotate("", xy=(103, 0), xytext=(103, len(LAYERS) * (height + 0.25) - 0.25),
                arrowprops=dict(arrowstyle="-|>", color="#6a2c70", linewidth=1.5))
    ax.text(104, len(LAYERS) * (height + 0.25) / 2, "imports point down", rotation=90, va="center", fontsize=8.5,
            color="#6a2c70")
    ax.set_xlim(-0.5, 106)
    ax.set_ylim(-0.2, len(LAYERS) * (height + 0.25))
    _save(fig, path)
    plt.close(fig)


def _unit_name(unit: str) -> str:
    if unit == "__init__":
        return "simulate()"
    return unit + ("/" if (PACKAGE / unit).is_dir() else ".py")


# ---- drawing ------------------------------------------------------------------------------------------------
def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Text stays text in the SVG (searchable, and checked by the tests); a fixed salt keeps the file stable.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "milvus-edu", "font.family": "DejaVu Sans"})
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_axis_off()
    fig.subplots_adjust(left=0.005, right=0.995, bottom=0.005, top=0.995)
    return fig, ax


def _save(fig, path: Path) -> None:
    metadata = {"Date": None} if path.suffix == ".svg" else {}
    fig.savefig(path, metadata=metadata)


def main(argv: list[str]) -> int:
    """Draw both pictures into book/images/ (or into the folder given as the one argument)."""
    out = Path(argv[0]) if argv else IMAGES
    out.mkdir(parents=True, exist_ok=True)
    draw_cluster(out / "cluster.svg")
    draw_layers(out / "layers.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
