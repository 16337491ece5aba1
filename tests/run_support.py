"""Helpers shared by the tests of run folders and the command line (tokens, forks, why)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from milvus_edu.cli import main


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (the run files and the object store), by relative path."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def run_main(capsys, *args) -> tuple[int, str, str]:
    """``milvus-edu ARGS`` in process: its exit status, standard output and standard error."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
