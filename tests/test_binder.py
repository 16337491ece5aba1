"""The Binder setup (binder/) agrees with pyproject.toml and sets up what the labs need."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
BINDER_EXTRAS = ("spark", "lab", "real")  # extras the labs need on top of [project] dependencies (lab 6: `real`)


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirements(lines) -> dict[str, Requirement]:
    out: dict[str, Requirement] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        assert not line.startswith("-"), f"binder/requirements.txt: pip option {line!r}; list plain requirements"
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in out, f"{req.name} listed twice"
        out[name] = req
    return out


def _expected() -> dict[str, Requirement]:
    project = _pyproject()["project"]
    lines = list(project["dependencies"])
    extras = project["optional-dependencies"]
    for extra in BINDER_EXTRAS:
        lines += extras[extra]
    return _requirements(lines)


def _compatible(binder: Requirement, wanted: Requirement) -> bool:
    """Binder's requirement admits no version that pyproject forbids.

    Either every clause of pyproject's specifier is in Binder's (Binder may add more), or Binder pins
    one exact version that pyproject accepts.
    """
    if set(wanted.specifier) <= set(binder.specifier):
        return True
    pins = [s for s in binder.specifier if s.operator in ("==", "===") and "*" not in s.version]
    return bool(pins) and all(wanted.specifier.contains(p.version, prereleases=True) for p in pins)


def test_requirements_have_the_same_packages_as_pyproject():
    got = _requirements((BINDER / "requirements.txt").read_text(encoding="utf-8").splitlines())
    want = _expected()
    assert sorted(got) == sorted(want), (
        f"binder/requirements.txt must list pyproject's dependencies + extras {BINDER_EXTRAS}: "
        f"missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}"
    )


def test_requirement_versions_are_compatible_with_pyproject():
    got = _requirements((BINDER / "requirements.txt").read_text(encoding="utf-8").splitlines())
    for name, wanted in _expected().items():
        binder = got[name]
        assert _compatible(binder, wanted), f"binder/requirements.txt has {binder}, pyproject.toml wants {wanted}"
        assert binder.extras == wanted.extras, f"{name}: extras {binder.extras} != {wanted.extras}"
        assert binder.marker == wanted.marker, f"{name}: marker {binder.marker} != {wanted.marker}"


def test_compatibility_check_itself():
    assert _compatible(Requirement("pandas>=2.1,<3"), Requirement("pandas<3,>=2.1"))
    assert _compatible(Requirement("pandas==2.2.3"), Requirement("pandas>=2.1,<3"))
    assert not _compatible(Requirement("pandas>=2.1"), Requirement("pandas>=2.1,<3"))
    assert not _compatible(Requirement("pandas==3.0.0"), Requirement("pandas>=2.1,<3"))


def test_apt_installs_java_17_for_spark():
    packages = [l.strip() for l in (BINDER / "apt.txt").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert "openjdk-17-jre-headless" in packages


def test_runtime_pins_python_311():
    lines = [l.strip() for l in (BINDER / "runtime.txt").read_text().splitlines() if l.strip()]
    assert lines == ["python-3.11"]
    assert _pyproject()["project"]["requires-python"] == ">=3.11"


@pytest.mark.parametrize("script", ["postBuild", "start"])
def test_scripts_are_executable_bash(script):
    path = BINDER / script
    mode = path.stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXOTH, f"binder/{script} must be executable (chmod +x)"
    assert path.read_text().startswith("#!/bin/bash\n")


def test_postbuild_installs_the_package_and_small_spark_defaults():
    text = (BINDER / "postBuild").read_text()
    commands = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    assert any(re.search(r"pip install .*--no-deps -e \.$", c) for c in commands), "postBuild must pip install -e ."
    assert "MILVUS_EDU_SPARK_DRIVER_MEMORY=512m" in text
    assert re.search(r"MILVUS_EDU_SPARK_MASTER=local\[\d\]", text)
    assert '"fetchNews"' in text and '"false"' in text
    # the Spark class archive is made at build time and named in the settings only if it was made
    assert re.search(r'^if .*python -m milvus_edu\.analysis\.class_archive "\$\{archive\}"; then$', text, re.M)
    assert 'echo "MILVUS_EDU_SPARK_CDS=${archive}" >> "${HOME}/.milvus-edu.env"' in text


def test_start_exports_the_settings_and_execs_the_server():
    text = (BINDER / "start").read_text()
    assert ".milvus-edu.env" in text and "set -a" in text
    assert text.rstrip().endswith('exec "$@"')


def test_start_passes_settings_to_the_command(tmp_path):
    import subprocess

    (tmp_path / ".milvus-edu.env").write_text("MILVUS_EDU_SPARK_DRIVER_MEMORY=512m\n")
    out = subprocess.run(
        ["bash", str(BINDER / "start"), "bash", "-c", "echo $MILVUS_EDU_SPARK_DRIVER_MEMORY"],
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "512m"
