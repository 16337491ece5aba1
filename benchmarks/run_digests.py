"""SHA-256 of every scenario's run files (events.parquet, events.jsonl, summary.json) at one seed.

Run before and after a change that must not alter run logs, checker verdicts or summaries, and compare
the two outputs (``diff``). Run from the repo root:
``python benchmarks/run_digests.py [--seed 1] [--duration S] [--scenarios a b] > digests.txt``.
``--duration`` caps each scenario's simulated seconds (its own default when it is shorter).

``--write-golden`` instead rewrites ``tests/data/golden_runs.json``, the run-log digests that
``tests/test_golden_runs.py`` checks on every commit (every scenario, seed 1, at most
``GOLDEN_DURATION_S`` simulated seconds). Do it only for a deliberate change of the run log, and say
in the commit message which scenarios changed and why.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's milvus_edu, whatever is installed
import milvus_edu  # noqa: E402
from milvus_edu.registry import scenarios  # noqa: E402

FILES = ("events.parquet", "events.jsonl", "summary.json")
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "data" / "golden_runs.json"
GOLDEN_SEED = 1
GOLDEN_DURATION_S = 5.0


def run_log_digest(name: str, seed: int, duration_s: float | None, folder: Path) -> str:
    """SHA-256 of ``events.jsonl`` of ``name`` run at ``seed`` for at most ``duration_s`` simulated
    seconds (the scenario's default when shorter or when ``duration_s`` is None), written in ``folder``."""
    default = scenarios()[name].duration_s
    kwargs = {} if duration_s is None else {"duration_s": min(duration_s, default)}
    milvus_edu.simulate(name, seed=seed, out_dir=folder, **kwargs)
    return hashlib.sha256((folder / "events.jsonl").read_bytes()).hexdigest()


def write_golden() -> None:
    """Rewrite :data:`GOLDEN` from this checkout's simulator."""
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(scenarios()):
            runs[name] = run_log_digest(name, GOLDEN_SEED, GOLDEN_DURATION_S, Path(tmp) / name)
            print(name, runs[name], flush=True)
    GOLDEN.write_text(json.dumps({"seed": GOLDEN_SEED, "max_duration_s": GOLDEN_DURATION_S,
                                  "file": "events.jsonl", "sha256": runs}, indent=1) + "\n")


def main() -> None:
    """Print one line per scenario and file: scenario, file name, digest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--scenarios", nargs="*", default=None)
    parser.add_argument("--write-golden", action="store_true", help=f"rewrite {GOLDEN.name} (see above)")
    args = parser.parse_args()
    if args.write_golden:
        write_golden()
        return
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
