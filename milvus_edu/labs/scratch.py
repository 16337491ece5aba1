"""Where a lab writes its runs, pictures and sweeps: a fresh folder that goes when the notebook's kernel stops.

Every lab writes files: run folders for Spark to read, filmstrips to show, sweeps to resume. Each made its own
folder in the machine's temporary folder and left it there, a few MB to 50 MB per lab each time it was run, until
the machine cleaned its temporary folder (a reboot, or never). :func:`scratch_folder` makes the same folder and
removes it, with everything in it, when the Python process that made it exits: a notebook kernel's shutdown or
restart. What a lab shows (tables, pictures) stays in the notebook; to keep a run's files, copy them out first,
or give ``simulate`` an ``out_dir`` of your own.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: The folders made so far in this process: each is removed when this process exits (``TemporaryDirectory``'s
#: finalizer), or as soon as it is dropped, so they are held here until then.
_HELD: list[tempfile.TemporaryDirectory] = []


def scratch_folder(prefix: str = "milvus-edu-") -> Path:
    """A new empty folder ``<temp>/<prefix><random>``, removed with its contents when this process exits.

    ``prefix`` names the folder (``"milvus-edu-lab3-"``); it is a name, not a path. ValueError if it holds a path
    separator."""
    if os.sep in prefix or (os.altsep and os.altsep in prefix):
        raise ValueError(f"prefix {prefix!r} is a folder name, not a path; e.g. scratch_folder('milvus-edu-lab1-')")
    folder = tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)
    _HELD.append(folder)
    return Path(folder.name)
