"""The class-data-sharing archive of Spark's classes (``milvus_edu.analysis.class_archive``): the driver's JVM options
name it only when it is there, a bad path gets one line, and a session started with the archive the run made maps its
classes from it (the JVM's own class-loading log says where each class came from)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from milvus_edu.analysis import SparkConfError
from milvus_edu.analysis.class_archive import ClassArchiveError, main, make_class_archive, making_marker
from milvus_edu.analysis.session import ENV_CLASS_ARCHIVE, class_archive_path, driver_java_options


def test_without_an_archive_the_driver_gets_only_the_quiet_logging(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_CLASS_ARCHIVE, raising=False)
    options = driver_java_options().split()
    assert class_archive_path() is None and len(options) == 1
    assert options[0].startswith("-Dlog4j2.configurationFile=file:")
    monkeypatch.setenv(ENV_CLASS_ARCHIVE, str(tmp_path / "not-made-yet.jsa"))  # named, not made: as if unset
    assert class_archive_path() is None and "SharedArchiveFile" not in driver_java_options()


def test_an_archive_that_is_there_is_given_to_the_driver_and_may_be_ignored_silently(monkeypatch, tmp_path):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"made")
    monkeypatch.setenv(ENV_CLASS_ARCHIVE, str(archive))
    assert class_archive_path() == archive
    options = driver_java_options().split()
    assert options[0].startswith("-Dlog4j2.configurationFile=file:")
    assert options[1:] == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def test_a_path_with_white_space_gets_one_line(monkeypatch, tmp_path, capsys):
    spaced = tmp_path / "my archives" / "spark.jsa"
    monkeypatch.setenv(ENV_CLASS_ARCHIVE, str(spaced))
    with pytest.raises(SparkConfError, match="white space"):
        driver_java_options()
    with pytest.raises(ClassArchiveError, match="white space"):
        make_class_archive(spaced)
    assert not spaced.parent.exists()  # refused before anything was made
    assert main([str(spaced)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "white space" in err
    assert main([]) == 2 and main(["--help"]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m milvus_edu.analysis.class_archive PATH")


@pytest.mark.spark
def test_a_session_maps_its_classes_from_the_archive_the_run_made(class_archive, tmp_path):
    assert class_archive.is_file() and class_archive.stat().st_size > 10_000_000
    assert not making_marker(class_archive).exists()
    logs = tmp_path / "class-load"
    logs.mkdir()
    env = {**os.environ, ENV_CLASS_ARCHIVE: str(class_archive),
           "JAVA_TOOL_OPTIONS": os.environ.get("JAVA_TOOL_OPTIONS", "") + f" -Xlog:class+load=info:file={logs}/%p.txt"}
    code = ("from milvus_edu.analysis import spark_session; s = spark_session(master='local[1]'); "
            "assert s.range(5).count() == 5; s.stop()")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # one log per JVM: spark-submit's launcher (not given the archive) and the driver, which is
    driver = [p for p in logs.iterdir() if "org.apache.spark.SparkContext " in p.read_text()]
    assert len(driver) == 1
    lines = driver[0].read_text().splitlines()
    from_archive = [line for line in lines if "source: shared objects file (top)" in line]
    assert any(" org.apache.spark.SparkContext " in line for line in from_archive)
    assert len(from_archive) > len(lines) // 2, (len(from_archive), len(lines))
