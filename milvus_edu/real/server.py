"""A real Milvus beside the model: PyPI's ``milvus`` 2.3.5 embedded standalone server, started and stopped from Python.

The ``milvus`` package ships the real Go/C++ binary (with embedded etcd and RocksMQ, local storage) as lzma files.
:class:`RealMilvus` unpacks them once into a cache folder (``$XDG_CACHE_HOME/milvus-edu`` or ``~/.cache/milvus-edu``),
then runs the binary in a fresh folder of its own: ``configs/`` (``milvus.yaml`` from the package's template, with
every port a free one from the OS, the log level raised to ``debug`` so the mechanisms' lines appear, and Milvus
parameters set from the simulator's ``--param`` names, :data:`PARAMS`), ``logs/`` (kept) and ``data/`` (etcd,
RocksMQ and the binlogs; removed at stop unless ``keep_data``; a temporary folder, when none was given, is removed
whole). The embedded etcd gets its own ports too, through an
``embedEtcd.yaml`` (by default it would listen on 2379/2380, and two servers on one machine would collide).

The server is stopped (SIGTERM to its process group, then SIGKILL) by the context manager, by :meth:`stop`, and by
an ``atexit`` hook, whatever failed in between; and Linux kills it if the thread that started it ends without
stopping it (a Python killed outright runs no ``atexit``), so start it from a thread that outlives it, such as the
main thread. It removes nothing but the ``data/`` folder it made.

Every way the server cannot start (not Linux x86-64, ``milvus`` or ``pymilvus`` missing, no binary at a given path,
no space, a port taken, a folder that is not empty, the binary dying) raises :class:`RealMilvusError` with one line
saying which and what to do, and leaves nothing running.

Note: Milvus 2.3's gRPC servers listen on every interface (the port only is configurable); clients here connect
to 127.0.0.1 only. The embedded etcd and the health endpoint listen on 127.0.0.1.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

#: The server version the model is compared with (the PyPI ``milvus`` package's version).
MILVUS_VERSION = "2.3.5"
#: Free disk space a run folder needs: RocksMQ and etcd preallocate files, and the logs grow at debug level.
NEEDED_FREE_MB = 400
#: Free space the one-off unpacking of the binaries needs (the unpacked files are about 230 MB).
UNPACK_FREE_MB = 300
#: How long a server may take to answer its health check (it takes 5-10 s on a laptop).
STARTUP_TIMEOUT_S = 120.0
#: How long a stopping server gets before it is killed: Milvus 2.3.5's graceful stop does not end (over 30 s here)
#: once a collection is loaded, and its data is thrown away anyway.
STOP_TIMEOUT_S = 2.0

# The template's port keys (MilvusServerConfig fills {{ name(int): default }}); each gets a free port.
_PORT_KEYS = ("etcd_port", "root_coord_port", "proxy_port", "proxy_internal_port", "query_coord_port",
              "query_node_port", "index_coord_port", "index_node_port", "data_coord_port", "data_node_port")

#: The simulator's parameters (``--param`` names) that Milvus 2.3.5's ``milvus.yaml`` also has:
#: model name -> (yaml key, how many nanoseconds one unit of the yaml value is, or None for a plain value).
PARAMS: dict[str, tuple[str, int | None]] = {
    "timetick.time_tick_interval_ns": ("proxy.timeTickInterval", 1_000_000),
    "timetick.max_task_num": ("proxy.maxTaskNum", None),
    "timetick.dml_channel_num": ("rootCoord.dmlChannelNum", None),
    "tso.session_ttl_ns": ("common.session.ttl", 1_000_000_000),
    "datanode.sync_period_ns": ("dataNode.segment.syncPeriod", 1_000_000_000),
    "datanode.insert_buf_size": ("dataNode.segment.insertBufSize", None),
    "datanode.delete_buf_bytes": ("dataNode.segment.deleteBufBytes", None),
    "datanode.flowgraph_max_queue_length": ("dataNode.dataSync.flowGraph.maxQueueLength", None),
    "datanode.skip_mode_skip_num": ("dataNode.dataSync.skipMode.skipNum", None),
    "datanode.skip_mode_cold_time_ns": ("dataNode.dataSync.skipMode.coldTime", 1_000_000_000),
    "datanode.update_channel_checkpoint_max_parallel": ("dataNode.channel.updateChannelCheckpointMaxParallel", None),
    "query.graceful_time_ms": ("common.gracefulTime", None),
    "query.max_timestamp_lag_ns": ("queryNode.scheduler.maxTimestampLag", 1_000_000_000),
}


class RealMilvusError(Exception):
    """The real server cannot be used; the message is one line saying which and what to do."""


def milvus_params(params: dict[str, object] | None) -> dict[str, object]:
    """The simulator's parameters (``{"timetick.time_tick_interval_ns": 100_000_000}``, values may be strings) as
    Milvus 2.3.5 ``milvus.yaml`` keys and values. Each is checked as the simulator checks it (a ``ValueError`` for an
    unknown name or a bad value); a parameter Milvus 2.3.5 has no key for raises :class:`RealMilvusError`."""
    from ..config import Config

    if not params:
        return {}
    config = Config().with_params(params)  # the simulator's own checks and conversions
    out = {}
    for name in params:
        if name not in PARAMS:
            raise RealMilvusError(f"parameter {name} has no counterpart in Milvus {MILVUS_VERSION}'s milvus.yaml; "
                                  f"the real server takes {', '.join(sorted(PARAMS))}")
        group, field = name.split(".", 1)
        value = getattr(getattr(config, group), field)
        key, unit = PARAMS[name]
        if unit is not None:
            if value % unit:
                raise RealMilvusError(f"parameter {name}={value} is not a whole number of {key}'s unit "
                                      f"({unit:,} ns); round it")
            value //= unit
        out[key] = value
    return out


def _check_platform() -> None:
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        raise RealMilvusError(f"the milvus {MILVUS_VERSION} server binary runs on Linux x86-64 only, this is "
                              f"{sys.platform} {platform.machine()}; use the model alone (milvus-edu simulate)")


def _milvus_package():
    try:
        import milvus
    except ImportError:
        raise RealMilvusError("the real server needs the `milvus` package (the embedded server): "
                              "pip install 'milvus-edu[real]'") from None
    return milvus


def check_pymilvus() -> None:
    """:class:`RealMilvusError` unless pymilvus 2.5 is importable."""
    try:
        import pymilvus
    except ImportError:
        raise RealMilvusError("the real server's client needs `pymilvus`: pip install 'milvus-edu[real]'") from None
    if not str(pymilvus.__version__).startswith("2.5."):
        raise RealMilvusError(f"milvus-edu drives the real server with pymilvus 2.5.x, found {pymilvus.__version__}: "
                              "pip install 'milvus-edu[real]'")


def cache_dir() -> Path:
    """Where the unpacked server binaries are kept between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "milvus-edu" / f"milvus-{MILVUS_VERSION}"


def _free_mb(path: Path) -> float:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free / 2**20


def unpacked_binary() -> Path:
    """The ``milvus`` executable from the ``milvus`` package, unpacked into :func:`cache_dir` once (under a file
    lock, so parallel test workers unpack it once); later calls only check the packed files' checksums."""
    milvus = _milvus_package()
    base = cache_dir()
    exe = base / "bin" / "milvus"
    try:
        base.mkdir(parents=True, exist_ok=True)
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not exe.is_file() and _free_mb(base) < UNPACK_FREE_MB:
                raise RealMilvusError(f"no space to unpack the Milvus binaries: {_free_mb(base):.0f} MB free in "
                                      f"{base}, they need about {UNPACK_FREE_MB} MB; free some space or set "
                                      "XDG_CACHE_HOME to a roomier disk")
            milvus._initialize_data_files(str(base))  # checks the .lzma files' md5s; unpacks what changed
    except OSError as exc:
        raise RealMilvusError(f"cannot unpack the Milvus binaries into {base} ({exc.strerror or exc}); set "
                              "XDG_CACHE_HOME to a writable folder with about 300 MB free") from None
    return exe


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS says is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(port: int) -> bool:
    """Whether something already listens on (or holds) ``port`` on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process descended from it (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if os.path.exists(f"/proc/{p}"):
            out.append(p)
            todo.extend(children.get(p, []))
    return out


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


#: Servers started and not stopped yet (strong references: a server nobody holds any more must still be stopped).
_RUNNING: "set[RealMilvus]" = set()


def _die_with_parent() -> None:
    """In the server's process, before it runs the binary: ask Linux to kill it when the thread that started it
    ends (``PR_SET_PDEATHSIG``), so a Python killed outright, which runs no ``atexit``, leaves no server behind."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


@atexit.register
def _stop_all() -> None:
    """Stop every server this process started and did not stop (a failed step, a forgotten ``stop``)."""
    for server in list(_RUNNING):
        server.stop()


class RealMilvus:
    """One real Milvus 2.3.5 standalone server on 127.0.0.1, in a fresh folder.

    ``folder``: where it keeps ``configs/``, ``logs/`` and ``data/`` (created; must be new or empty; default a new
    temporary folder); ``params``: the simulator's parameter names (:data:`PARAMS`); ``port``: the client port (default
    a free one); ``binary``: a ``milvus`` executable to run instead of the package's; ``log_level``: Milvus's
    ``log.level``; ``keep_data``: keep ``data/`` at stop.

    Use it as a context manager (``with RealMilvus() as server: MilvusClient(server.uri)``) or call :meth:`start`
    and :meth:`stop`. After start: :attr:`uri`, :attr:`pid`, :attr:`start_s` (seconds from launch to a healthy
    server) and :attr:`rss_mb_at_start` (resident memory of its process tree then); :meth:`rss_mb` now.
    """

    def __init__(self, folder: str | os.PathLike | None = None, params: dict[str, object] | None = None,
                 port: int | None = None, binary: str | os.PathLike | None = None, log_level: str = "debug",
                 keep_data: bool = False, startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.folder = Path(folder) if folder is not None else None
        self.yaml = milvus_params(params)
        self.params = dict(params or {})
        self.port = port
        self.binary = Path(binary) if binary is not None else None
        self.log_level = log_level
        self.keep_data = keep_data
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.start_s: float | None = None
        self.rss_mb_at_start: float | None = None
        self.started_at: float | None = None  # time.time() when the server was healthy
        self.metrics_port: int | None = None
        self._fds: list = []
        self._made_data = False
        self._temporary = folder is None

    # ---- the public face

    @property
    def uri(self) -> str:
        """Where pymilvus connects: ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """Where the server serves its Prometheus metrics (``http://127.0.0.1:<metrics port>/metrics``; the port is
        a free one, given to the binary as ``METRICS_PORT``)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def logs(self) -> Path:
        """The server's log folder (``standalone-1.log`` is the one the mechanisms write to)."""
        return self._folder() / "logs"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def rss_mb(self) -> float:
        """Resident memory of the server's process tree now, in MiB (0 when it is not running)."""
        if not self.running:
            return 0.0
        return sum(_status_kb(p, "VmRSS") for p in process_tree(self.pid)) / 1024.0

    def __enter__(self) -> "RealMilvus":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()

    # ---- start

    def _folder(self) -> Path:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="milvus-edu-real-"))
        return self.folder

    def start(self) -> "RealMilvus":
        """Launch the server and wait until it is healthy and answers pymilvus; :class:`RealMilvusError` (with
        nothing left running) when it cannot."""
        if self.proc is not None:
            raise RealMilvusError("this server is already started; use a new RealMilvus for a second one")
        _check_platform()
        check_pymilvus()
        milvus = _milvus_package()
        if self.binary is not None:
            exe = self.binary
            if not exe.is_file():
                raise RealMilvusError(f"no Milvus server binary at {exe}; give the path of a `milvus` executable or "
                                      "leave binary out to use the milvus package's")
        else:
            exe = unpacked_binary()
        # absolute: the server runs in this folder, so a relative one (compare --out runs/x) would name another
        folder = self._prepare_folder().absolute()
        ports = self._ports()
        self.metrics_port = ports["metrics"]
        config = self._write_config(milvus, folder, ports)
        env = dict(os.environ)
        env.update({
            "DEPLOY_MODE": "STANDALONE",
            "METRICS_PORT": str(ports["metrics"]),
            "MILVUS_RUN_DIR": str(folder / "run"),
            "MILVUSCONF": str(folder / "configs"),
            "ETCD_CONFIG_PATH": str(config),
            "LD_LIBRARY_PATH": ":".join(p for p in (str(exe.parent), os.environ.get("LD_LIBRARY_PATH", "")) if p),
        })
        launched = time.monotonic()
        try:
            for name in ("stdout", "stderr"):
                self._fds.append(open(folder / "logs" / f"milvus-{name}.log", "w", encoding="utf-8"))
            # Its own session: stop() signals the whole process group, so nothing it spawned outlives it.
            self.proc = subprocess.Popen([str(exe), "run", "standalone"], cwd=folder, env=env,
                                         stdout=self._fds[0], stderr=self._fds[1], stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        except OSError as exc:
            self._close_fds()
            if exc.errno in (errno.ENOEXEC, errno.EACCES):
                raise RealMilvusError(f"{exe} cannot run here ({exc.strerror}); it is a Linux x86-64 binary: "
                                      "reinstall the milvus package or give another binary") from None
            raise RealMilvusError(f"cannot start {exe} ({exc.strerror or exc})") from None
        self.pid = self.proc.pid
        _RUNNING.add(self)
        try:
            self._wait_healthy(ports["metrics"])
            self._wait_client()
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - launched
        self.started_at = time.time()
        self.rss_mb_at_start = self.rss_mb()
        return self

    def _prepare_folder(self) -> Path:
        folder = self._folder()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise RealMilvusError(f"{folder} exists and is not an empty folder; give the server a new folder")
        free = _free_mb(folder)
        if free < NEEDED_FREE_MB:
            raise RealMilvusError(f"no space for a Milvus server: {free:.0f} MB free at {folder}, it needs about "
                                  f"{NEEDED_FREE_MB} MB; free some space or give a folder on another disk")
        try:
            for sub in ("configs", "logs", "data", "run"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RealMilvusError(f"cannot create the server folder {folder} ({exc.strerror}); give a writable "
                                  "folder") from None
        self._made_data = True
        return folder

    def _ports(self) -> dict[str, int]:
        if self.port is not None:
            if port_taken(self.port):
                raise RealMilvusError(f"port {self.port} on 127.0.0.1 is taken; give another port or none for a "
                                      "free one")
        else:
            self.port = free_port()
        ports = {"proxy_port": self.port}
        taken = {self.port}
        for name in (*_PORT_KEYS, "metrics", "etcd_peer"):
            if name in ports:
                continue
            p = free_port()
            while p in taken:
                p = free_port()
            taken.add(p)
            ports[name] = p
        return ports

    def _write_config(self, milvus, folder: Path, ports: dict[str, int]) -> Path:
        """``configs/milvus.yaml`` from the package's template and ``configs/embedEtcd.yaml``; returns the latter."""
        cfg = milvus.MilvusServerConfig(data_dir=str(folder), **{k: ports[k] for k in _PORT_KEYS})
        cfg.set("log.level", self.log_level)
        for key, value in self.yaml.items():
            cfg.set(key, value)
        try:
            cfg.resolve()  # binds each port once to check it, then writes configs/milvus.yaml
        except RuntimeError as exc:
            raise RealMilvusError(f"a port for the server is taken ({exc}); try again, or give another port") from None
        written = (folder / "configs" / "milvus.yaml").read_text(encoding="utf-8")
        for key, value in [("log.level", self.log_level), *self.yaml.items()]:
            leaf = key.rsplit(".", 1)[1]
            if f"{leaf}: {value}" not in written:
                raise RealMilvusError(f"Milvus {milvus.__version__}'s config template has no {key}; leave that "
                                      "parameter out for the real server")
        client, peer = f"http://127.0.0.1:{ports['etcd_port']}", f"http://127.0.0.1:{ports['etcd_peer']}"
        etcd = folder / "configs" / "embedEtcd.yaml"
        etcd.write_text(
            f"name: default\nlisten-client-urls: {client}\nadvertise-client-urls: {client}\n"
            f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n"
            "initial-cluster-state: new\n", encoding="utf-8")
        return etcd

    def _log_hint(self) -> str:
        """The last error-looking line of the server's logs (why it died), shortened."""
        lines: list[str] = []
        for name in ("milvus-stderr.log", "milvus-stdout.log", "standalone-1.log"):
            try:
                lines += (self.logs / name).read_text(encoding="utf-8", errors="replace").splitlines()[-200:]
            except OSError:
                pass
        bad = [ln for ln in lines if any(w in ln.lower() for w in ("panic", "fatal", "error", "address already in use"))]
        text = (bad or lines or ["no log lines"])[-1].strip()
        return text[:200]

    def _wait_healthy(self, metrics_port: int) -> None:
        url = f"http://127.0.0.1:{metrics_port}/healthz"
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                hint = self._log_hint()
                what = "a port it needs is taken" if "address already in use" in hint else "it stopped"
                raise RealMilvusError(f"the Milvus server exited at start ({what}; exit code {self.proc.returncode}): "
                                      f"{hint} (logs in {self.logs})")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if "OK" in resp.read().decode("utf-8", "replace"):
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        raise RealMilvusError(f"the Milvus server was not healthy after {self.startup_timeout_s:.0f} s; see its logs in "
                              f"{self.logs}")

    def _wait_client(self) -> None:
        """A healthy server may still refuse the first calls for a moment: wait until ``list_collections`` works."""
        from pymilvus import MilvusClient

        deadline = time.monotonic() + 30.0
        last = None
        while time.monotonic() < deadline:
            try:
                client = MilvusClient(uri=self.uri, timeout=5)
                try:
                    client.list_collections()
                    return
                finally:
                    client.close()
            except Exception as exc:  # pymilvus raises several types while the proxy comes up
                last = exc
                time.sleep(0.2)
        raise RealMilvusError(f"the Milvus server is healthy but pymilvus cannot use it ({last}); see {self.logs}")

    # ---- stop

    def stop(self) -> None:
        """Stop the server and everything it started (SIGTERM to its process group, SIGKILL after
        :data:`STOP_TIMEOUT_S`), close its log files and remove its ``data/`` unless ``keep_data``. Safe to call
        twice."""
        proc, self.proc = self.proc, None
        _RUNNING.discard(self)
        if proc is not None:
            for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # The group may hold processes that outlived the leader: kill what is left.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._close_fds()
        if self._made_data and not self.keep_data and self.folder is not None:
            if self._temporary:  # a folder nobody named: nothing in it to keep
                shutil.rmtree(self.folder, ignore_errors=True)
            shutil.rmtree(self.folder / "data", ignore_errors=True)
            shutil.rmtree(self.folder / "run", ignore_errors=True)
            self._made_data = False

    def _close_fds(self) -> None:
        for fh in self._fds:
            fh.close()
        self._fds = []
