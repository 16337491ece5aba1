"""Peak memory (and time) of running a lab notebook top to bottom in a fresh kernel.

Samples the resident memory of the kernel and all its descendants (the Spark JVM included) from
/proc every 100 ms while nbclient executes the notebook. Prints figures only.
Run: ``python benchmarks/bench_notebook.py [notebooks/01_tso.ipynb]``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every descendant."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
        except OSError:
            continue
        todo += _children(p)
    return total


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "notebooks/01_tso.ipynb")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    peak = {"bytes": 0}
    stop = threading.Event()

    def sample():
        while not stop.wait(0.1):
            km = getattr(client, "km", None)
            proc = getattr(getattr(km, "provisioner", None), "process", None)
            if proc is not None:
                peak["bytes"] = max(peak["bytes"], tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    stop.set()
    sampler.join()
    print(f"notebook {path}: {elapsed:.1f} s wall, peak RSS of kernel + descendants {peak['bytes'] / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
