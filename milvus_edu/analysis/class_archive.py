"""A class-data-sharing archive of Spark's classes, so that later Spark sessions start faster.

Most of a Spark session's start-up, and of its first analysis, goes into loading and verifying classes from
Spark's ~250 jars, one by one, in every new JVM. Java's dynamic class-data sharing (CDS, Java 13+) lets one JVM
write the classes it loaded to a file when it exits (``-XX:ArchiveClassesAtExit``); later JVMs given that file
(``-XX:SharedArchiveFile``) map those classes instead. :func:`make_class_archive` runs one representative session
in a child process, a short run of every lesson's first scenario analysed by every registered analysis, and keeps
what its driver JVM loaded; :func:`milvus_edu.analysis.spark_session` uses the archive that
``$MILVUS_EDU_SPARK_CDS`` names once the file is there.

Measured on the 2-core machine the suite runs on (2026-11-26): a session and one analysis took 11 CPU s instead
of 17; lab 3's Spark cell 9.4 s instead of 15.6, lab 4's 7.6 instead of 13.3. Making the archive takes about
50 CPU s and 180 MB of disk. An archive is tied to the Java and the Spark jars it was made with: a JVM that finds it
does not match starts as usual, without it and silently.

From a shell: ``python -m milvus_edu.analysis.class_archive ~/.cache/milvus-edu/spark.jsa``, then
``export MILVUS_EDU_SPARK_CDS=~/.cache/milvus-edu/spark.jsa`` (Binder's image makes one at build time).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .session import ENV_CLASS_ARCHIVE, ENV_CONF, SparkConfError, extra_conf, log4j2_config_path

#: Simulated seconds of each scenario the archive's session analyses: enough for every event kind the analyses
#: read to appear, short enough that the runs take a second or two.
WARM_UP_S = 5.0
_MODULE = "milvus_edu.analysis.class_archive"  # this module's name, also when run with ``python -m``


class ClassArchiveError(RuntimeError):
    """The archive could not be made; the message says why in one line."""


def making_marker(path: Path) -> Path:
    """The file that exists while :func:`make_class_archive` makes ``path``, so that others can wait for it."""
    return path.with_name(path.name + ".making")


def _path_problem(text: str) -> str | None:
    """What is wrong with ``text`` as an archive's path, in one line, or ``None``."""
    if any(ch.isspace() for ch in text):
        return (f"{text!r}: a class archive's path cannot hold white space (the JVM's options are one "
                "space-separated string); choose a folder whose path has none")
    return None


def make_class_archive(path: str | os.PathLike, master: str = "local[2]", timeout_s: float = 600) -> Path:
    """Make the class-data-sharing archive ``path`` (its folder is created) and return it.

    A child Python process starts a Spark session (``master``) whose driver JVM archives its classes when it
    exits, and analyses short runs with it (:func:`_warm_up`). The archive is written beside ``path`` and renamed
    to it only when complete, so a JVM never maps half a file; an existing ``path`` is replaced. Raises
    :class:`ClassArchiveError` if the child fails or makes no archive.
    """
    path = Path(path).expanduser().absolute()
    problem = _path_problem(str(path))
    if problem:
        raise ClassArchiveError(problem)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    marker = making_marker(path)
    marker.write_text(str(os.getpid()))
    try:
        conf = {**extra_conf(), "spark.driver.extraJavaOptions":
                f"-Dlog4j2.configurationFile=file:{log4j2_config_path()} -XX:ArchiveClassesAtExit={partial}"}
        env = {**os.environ, ENV_CONF: ";".join(f"{k}={v}" for k, v in conf.items())}
        env.pop(ENV_CLASS_ARCHIVE, None)  # an archive is made on top of the JDK's own, not of another one
        child = subprocess.run([sys.executable, "-c", f"from {_MODULE} import _warm_up; _warm_up({master!r})"],
                               env=env, capture_output=True, text=True, timeout=timeout_s)
        if child.returncode != 0:
            last = (child.stderr.strip().splitlines() or ["no message"])[-1]
            raise ClassArchiveError(f"the warm-up session failed ({last})")
        if not partial.is_file():
            raise ClassArchiveError("the driver JVM wrote no archive (a Java older than 13, or it did not exit "
                                    "cleanly); Spark starts as usual without one")
        os.replace(partial, path)
        return path
    except subprocess.TimeoutExpired:
        raise ClassArchiveError(f"the warm-up session took more than {timeout_s:g} s") from None
    finally:
        partial.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)


def _warm_up(master: str) -> None:
    """The archive's session: a short run of each lesson's first scenario, loaded and analysed by every registered
    analysis, so that the classes Spark loads for the lessons' work (Parquet and JSON reading, grouping, windows,
    Arrow to pandas) are the ones archived. Run in the child process of :func:`make_class_archive`."""
    from milvus_edu.registry import mechanisms
    from milvus_edu.sim.run import simulate

    from . import load_events, spark_session, to_pandas

    with tempfile.TemporaryDirectory(prefix="milvus-edu-class-archive-") as tmp:
        folders = []
        for mechanism in mechanisms():
            if mechanism.scenarios:
                scenario = mechanism.scenarios[0].name
                simulate(scenario, seed=1, duration_s=WARM_UP_S, out_dir=Path(tmp) / scenario, keep_events=False)
                folders.append(Path(tmp) / scenario)
        spark = spark_session(master=master)
        loaded = load_events(spark, folders)
        for mechanism in mechanisms():
            for spark_function, _ in (mechanism.analyses() if mechanism.analyses else {}).values():
                to_pandas(spark_function(loaded.events))
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m milvus_edu.analysis.class_archive PATH``: make the archive, say where and how to use it."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m milvus_edu.analysis.class_archive PATH  (e.g. ~/.cache/milvus-edu/spark.jsa)",
              file=sys.stderr)
        return 2
    problem = _path_problem(args[0])
    if problem:  # a user's mistake: exit 2, as the CLI's
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        path = make_class_archive(args[0])
    except (ClassArchiveError, SparkConfError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"made {path} ({path.stat().st_size / 1e6:.0f} MB); use it with: export {ENV_CLASS_ARCHIVE}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
