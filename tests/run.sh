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

python -m pip install -q -e ".[test]"
# --durations: every run ends with its slowest tests, the first place to look when the suite nears 10 minutes
# One worker more than CPUs: a worker often waits (for a JVM, a JupyterLab, a browser, a Milvus server to start) and
# its CPU would idle; on 2 cores, 3 workers ran a fresh clone's suite in 10:55 against 12:23 for 2 (4: 10:48).
workers=$(python -c "import os; print(len(os.sched_getaffinity(0)) + 1)")
exec python -m pytest -n "$workers" --durations=15 "$@"
