"""A local, quiet, offline Spark session for analysing run logs.

``spark_session()`` starts (or returns) the one SparkSession of this Python process:

* master ``local[*]`` unless the argument or ``MILVUS_EDU_SPARK_MASTER`` says otherwise (a
  ``spark://host:7077`` master for users who outgrow one machine);
* driver memory ``1g`` unless the argument or ``MILVUS_EDU_SPARK_DRIVER_MEMORY`` says otherwise
  (Binder gives a notebook about 2 GB in all);
* no Spark UI, no console progress bars, bound to the loopback interface, session time zone UTC,
  8 shuffle partitions (run logs are small; 200 tiny tasks would be slower);
* any other Spark setting from ``MILVUS_EDU_SPARK_CONF``, ``key=value`` pairs separated by ``;`` (they
  override the ones above; e.g. ``spark.executor.memory=4g`` for a cluster);
* Python tasks (a sweep's runs) run in this very Python: ``PYSPARK_PYTHON`` is set to it unless the user set
  it (pyspark would otherwise start whatever ``python3`` comes first on ``PATH``, which in a Jupyter kernel or a
  virtual environment that is not activated may be another Python, without milvus-edu or of another version);
* faster to start when ``MILVUS_EDU_SPARK_CDS`` names a class-data-sharing archive of Spark's classes that
  exists (:mod:`milvus_edu.analysis.class_archive` makes one): the driver JVM maps the classes it would
  otherwise load and verify from Spark's jars one by one, and a session with its first analysis takes about
  a third less CPU (:func:`driver_java_options`);
* quiet from the first line: a log4j2 configuration (:data:`LOG4J2_PROPERTIES`, level ERROR) is
  given to the driver JVM when it starts, and the JVM's own stderr (its start-up notices, e.g.
  ``WARNING: Using incubator modules``) goes to a log file (:func:`jvm_log_path`), so no warning box
  appears in JupyterLab or the book. Spark's errors still reach Python as exceptions.

pyspark is an optional extra (``pip install 'milvus-edu[spark]'``), so it is imported inside the
functions, never at module import. A missing pyspark or a missing/too old Java raises
:class:`SparkUnavailableError` with one line that says what to install.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ENV_MASTER = "MILVUS_EDU_SPARK_MASTER"
ENV_DRIVER_MEMORY = "MILVUS_EDU_SPARK_DRIVER_MEMORY"
ENV_CONF = "MILVUS_EDU_SPARK_CONF"
ENV_CLASS_ARCHIVE = "MILVUS_EDU_SPARK_CDS"
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "1g"
SHUFFLE_PARTITIONS = 8


#: Spark's log4j2 configuration: errors only, on the JVM's stderr (which goes to :func:`jvm_log_path`).
LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def log4j2_config_path() -> Path:
    """The file holding :data:`LOG4J2_PROPERTIES` (written to the temp directory when missing or stale)."""
    path = Path(tempfile.gettempdir()) / "milvus-edu-spark-log4j2.properties"
    if not path.is_file() or path.read_text() != LOG4J2_PROPERTIES:
        path.write_text(LOG4J2_PROPERTIES)
    return path


def jvm_log_path() -> Path:
    """Where the driver JVM's stderr goes (one file per Python process)."""
    return Path(tempfile.gettempdir()) / f"milvus-edu-spark-{os.getpid()}.log"


@contextlib.contextmanager
def _stderr_to(path: Path):
    """Point file descriptor 2 at ``path`` while the JVM is started, so the JVM inherits the file as
    its stderr for good; this process gets its own stderr back afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class SparkUnavailableError(RuntimeError):
    """Spark cannot start here: pyspark is not installed, or Java is missing or too old."""


def resolve_master(master: str | None = None) -> str:
    """The master to use: the argument, else ``$MILVUS_EDU_SPARK_MASTER``, else ``local[*]``."""
    return master or os.environ.get(ENV_MASTER) or DEFAULT_MASTER


def resolve_driver_memory(driver_memory: str | None = None) -> str:
    """The driver memory: the argument, else ``$MILVUS_EDU_SPARK_DRIVER_MEMORY``, else ``1g``."""
    return driver_memory or os.environ.get(ENV_DRIVER_MEMORY) or DEFAULT_DRIVER_MEMORY


class SparkConfError(ValueError):
    """``MILVUS_EDU_SPARK_CONF`` is not a list of Spark settings; the message says which part and how to fix it."""


def extra_conf() -> dict[str, str]:
    """The settings ``$MILVUS_EDU_SPARK_CONF`` gives: ``key=value`` pairs separated by ``;`` (blank parts ignored),
    each key a Spark setting (``spark.``...). A part that is not one raises :class:`SparkConfError`."""
    out = {}
    for part in os.environ.get(ENV_CONF, "").split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark.") or not value.strip():
            raise SparkConfError(f"{ENV_CONF}: {part.strip()!r} is not a Spark setting; give key=value pairs "
                                 "separated by ';', each key starting with 'spark.' (e.g. spark.executor.memory=4g)")
        out[key] = value.strip()
    return out


def class_archive_path() -> Path | None:
    """The class-data-sharing archive ``$MILVUS_EDU_SPARK_CDS`` names, if it names a file that exists; else ``None``
    (unset, or not made yet: the JVM then starts as usual). A path with white space raises :class:`SparkConfError`,
    since the JVM's options are one space-separated string."""
    raw = os.environ.get(ENV_CLASS_ARCHIVE, "").strip()
    if not raw:
        return None
    if any(ch.isspace() for ch in raw):
        raise SparkConfError(f"{ENV_CLASS_ARCHIVE}: {raw!r} has white space, which the JVM's options cannot hold; "
                             "put the archive in a folder whose path has none")
    path = Path(raw).expanduser()
    return path if path.is_file() else None


def driver_java_options() -> str:
    """The driver JVM's options: the quiet log4j2 configuration, and the class archive of :func:`class_archive_path`
    when there is one. ``-Xshare:auto`` lets a JVM that cannot use the archive (another Java, another Spark: it
    checks the jars it was made from) start without it, and the ``cds`` log is off so that it says nothing then."""
    options = [f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"]
    archive = class_archive_path()
    if archive is not None:
        options += [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    return " ".join(options)


def spark_conf(master: str | None = None, driver_memory: str | None = None,
               app_name: str = "milvus-edu") -> dict[str, str]:
    """Every setting :func:`spark_session` passes to Spark (a plain dict, for docs and tests): the defaults of
    this module, then those of ``$MILVUS_EDU_SPARK_CONF`` (:func:`extra_conf`)."""
    return {
        "spark.master": resolve_master(master),
        "spark.app.name": app_name,
        "spark.driver.memory": resolve_driver_memory(driver_memory),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.extraJavaOptions": driver_java_options(),
        **extra_conf(),
    }


def _min_java_version() -> int:
    import pyspark

    major = int(re.match(r"(\d+)", pyspark.__version__).group(1))
    return 17 if major >= 4 else 8


def _java_executable() -> str | None:
    # The same rule as pyspark's launcher: $JAVA_HOME/bin/java when JAVA_HOME is set, else PATH.
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = os.path.join(home, "bin", "java")
        return exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    return shutil.which("java")


def java_version() -> int | None:
    """The major version of the Java that Spark would start (8 for 1.8), or None when there is none."""
    exe = _java_executable()
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_spark_available() -> None:
    """Raise :class:`SparkUnavailableError` unless pyspark imports and a recent enough Java exists."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailableError(
            "pyspark is not installed; install the extra with: pip install 'milvus-edu[spark]'") from None
    need = _min_java_version()
    have = java_version()
    where = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    if have is None:
        raise SparkUnavailableError(
            f"no Java runtime found on {where}; Spark needs Java {need}+ "
            f"(e.g. apt-get install openjdk-17-jre-headless)")
    if have < need:
        raise SparkUnavailableError(
            f"Java {have} found on {where}, but this Spark needs Java {need}+ "
            f"(e.g. apt-get install openjdk-17-jre-headless, or point JAVA_HOME at a newer JDK)")


def spark_session(master: str | None = None, driver_memory: str | None = None, app_name: str = "milvus-edu"):
    """Start (or return) this process's SparkSession with the settings of :func:`spark_conf`.

    Spark keeps one session per process: when one is already running, it is returned as it is
    (with a warning if its master differs from the one asked for); stop it first to change master
    or driver memory.
    """
    check_spark_available()
    from pyspark.sql import SparkSession

    conf = spark_conf(master, driver_memory, app_name)
    # Spark looks the host name up to find "its" address and warns when it resolves to loopback;
    # we bind to loopback anyway, so say so before the JVM starts (only if the user did not choose).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # pyspark's SparkContext reads PYSPARK_PYTHON (default "python3" on PATH) for its Python workers: this Python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _stderr_to(jvm_log_path()):
            spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises PySparkRuntimeError / RuntimeError when the JVM dies
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailableError(f"Spark did not start ({first}); the JVM's messages are in "
                                    f"{jvm_log_path()}") from exc
    running = spark.sparkContext.master
    if running != conf["spark.master"]:
        warnings.warn(f"a Spark session with master {running!r} is already running in this process; "
                      f"stop it to use {conf['spark.master']!r}", stacklevel=2)
    return spark
