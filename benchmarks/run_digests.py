"""SHA-256 of every scenario's run files (events.parquet, events.jsonl, summary.json) at one seed.

Run before and after a change that must not alter run logs, checker verdicts or summaries, and compare
the two outputs (``diff``). Run from the repo root:
``python benchmarks/run_digests.py [--seed 1] [--duration S] [--scenarios a b] > digests.txt``.
``--duration`` caps each scenario's simulated seconds (its own default when it is shorter).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's milvus_edu, whatever is installed
import milvus_edu  # noqa: E402
from milvus_edu.registry import scenarios  # noqa: E402

FILES = ("events.parquet", "events.jsonl", "summary.json")


def main() -> None:
    """Print one line per scenario and file: scenario, file name, digest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--scenarios", nargs="*", default=None)
    args = parser.parse_args()
    names = args.scenarios or list(scenarios())
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = Path(tmp) / name
            kwargs = {} if args.duration is None else {"duration_s": args.duration}
            milvus_edu.simulate(name, seed=args.seed, out_dir=out, **kwargs)
            for file in FILES:
                print(name, file, hashlib.sha256((out / file).read_bytes()).hexdigest(), flush=True)


if __name__ == "__main__":
    main()
