#!/usr/bin/env bash
# Install what the test suite needs and run all of it: the README's test command, and what .ci/run calls.
# The tests run on one pytest-xdist worker per CPU and one more, grouped as tests/conftest.py says; give
# pytest options after the command (`bash tests/run.sh -n 0 tests/test_tso.py` runs one file in-process).
# System packages that pip cannot install (a Java 17+ runtime for Spark, Debian's chromium for the
# browser test) are installed with apt-get only when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -n "$v" ] && [ "$v" -ge 17 ]
}

apt_pkgs=()
java_ok || apt_pkgs+=(openjdk-17-jre-headless)
[ -x /usr/bin/chromium ] || apt_pkgs+=(chromium)
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  echo "installing system packages: ${apt_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${apt_pkgs[@]}"
fi

# The editable install is built with the setuptools and wheel already here when they are new enough for
# pyproject.toml's [build-system]: pip's isolated build would first install them into a throwaway environment
# (12 s against 7 s for this command when nothing else is missing). A machine without them gets the isolated build.
build_opts=()
if python -c 'import sys, setuptools, wheel; sys.exit(int(setuptools.__version__.split(".")[0]) < 68)' 2>/dev/null; then
  build_opts+=(--no-build-isolation)
fi
python -m pip install -q ${build_opts[@]+"${build_opts[@]}"} -e ".[test]"
# Bytecode caches, even where the environment turns them off (PYTHONDONTWRITEBYTECODE; this development machine
# does): every kernel, CLI run and Spark Python worker of the suite imports the package, ~0.3 CPU s each to compile
# it from source, and each worker rewrites every test module's asserts, ~8 CPU s, which pytest keeps for the next
# run only when it may write them. The caches go to __pycache__/ folders, which git ignores.
unset PYTHONDONTWRITEBYTECODE
# --durations: every run ends with its slowest tests, the first place to look when the suite nears 10 minutes
# One worker more than CPUs: a worker often waits (for a JVM, a JupyterLab, a browser, a Milvus server to start) and
# its CPU would idle; on 2 cores, 3 workers ran a fresh clone's suite in 10:55 against 12:23 for 2 (4: 10:48).
workers=$(python -c "import os; print(len(os.sched_getaffinity(0)) + 1)")
exec python -m pytest -n "$workers" --durations=15 "$@"
