"""A Spark standalone cluster on this machine, started from the pyspark installation (no download).

:class:`StandaloneCluster` starts one master and one worker bound to 127.0.0.1 on free ports, with
``bin/spark-class`` of the installed pyspark, and stops both by their process ids. It is the same kind
of cluster a course or a lab runs on many machines, so a sweep that runs against its
``spark://127.0.0.1:<port>`` runs unchanged against theirs (there the run folders must be on a file
system every machine sees at the same path).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS says is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    """The pyspark installation's folder, which holds ``bin/spark-class`` and Spark's jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """One Spark master and one worker (``cores`` cores, ``memory`` for executors) on 127.0.0.1.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. ``master_url`` is the
    ``spark://127.0.0.1:<port>`` to give :func:`milvus_edu.sweep.run_sweep`; ``pids`` the two JVMs'
    process ids. Their logs and the worker's scratch folder go to ``log_dir`` (a new temporary folder by
    default).
    """

    def __init__(self, cores: int = 2, memory: str = "1g", log_dir: str | os.PathLike | None = None,
                 timeout_s: float = 90.0):
        self.cores, self.memory, self.timeout_s = cores, memory, timeout_s
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="milvus-edu-cluster-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.master_url: str | None = None
        self.web_url: str | None = None
        self._procs: list[subprocess.Popen] = []

    @property
    def pids(self) -> list[int]:
        """The process ids of the master and the worker JVMs (as started)."""
        return [p.pid for p in self._procs]

    def _launch(self, name: str, cls: str, args: list[str]) -> None:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_WORKER_DIR": str(self.log_dir / "work"), "SPARK_NO_DAEMONIZE": "1"}
        with open(self.log_dir / f"{name}.log", "ab") as log:
            # spark-class ends by exec'ing the JVM, so the process started here is the JVM itself.
            self._procs.append(subprocess.Popen([str(spark_home() / "bin" / "spark-class"), cls, *args], env=env,
                                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def _alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=2) as resp:
                state = json.load(resp)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def start(self) -> str:
        """Start the master, then the worker; wait until the worker has registered. Returns ``master_url``."""
        port, web = free_port(), free_port()
        self.master_url, self.web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
        try:
            self._launch("master", "org.apache.spark.deploy.master.Master",
                         ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web)])
            self._launch("worker", "org.apache.spark.deploy.worker.Worker",
                         ["--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                          "--cores", str(self.cores), "--memory", self.memory, self.master_url])
            deadline = time.monotonic() + self.timeout_s
            while self._alive_workers() < 1:
                dead = [p for p in self._procs if p.poll() is not None]
                if dead or time.monotonic() > deadline:
                    why = "a JVM exited" if dead else f"no worker registered in {self.timeout_s:.0f} s"
                    raise RuntimeError(f"the standalone cluster did not start ({why}); see the logs in {self.log_dir}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return self.master_url

    def stop(self) -> None:
        """Stop the worker, then the master, by their process ids (SIGTERM, then SIGKILL after 20 s)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._procs = []

    def __enter__(self) -> "StandaloneCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
