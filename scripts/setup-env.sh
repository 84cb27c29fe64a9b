# Sourced by scripts/*.sh: create .venv with the project and its test extras installed,
# check the Java runtime PySpark needs; ensure_chromium installs Chromium (as root) when missing.
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: Python 3.11 or newer is needed ($PYTHON is $("$PYTHON" -V 2>&1))" >&2
    exit 1
fi
if ! command -v java >/dev/null 2>&1; then
    echo "error: Java 17+ is needed for PySpark (Debian: apt-get install openjdk-17-jre-headless)" >&2
    exit 1
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
if [ "${java_major:-0}" -lt 17 ]; then
    echo "error: Java 17+ is needed for PySpark, found Java ${java_major:-unknown}" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export SPARK_LOCAL_IP=127.0.0.1

# Headless Chromium renders the bridge's status page in tests (Debian's package); the test
# command calls this, the demo does not need it.
ensure_chromium() {
    if [ -x /usr/bin/chromium ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: Chromium is needed for the status-page tests; as root: apt-get install -y --no-install-recommends chromium" >&2
        exit 1
    fi
    if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        DEBIAN_FRONTEND=noninteractive apt-get update -q  # a fresh container has no lists
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
}
