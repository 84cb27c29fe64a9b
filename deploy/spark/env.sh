# Shared settings of the standalone-cluster scripts (sourced, not run).
# SPARK_HOME defaults to the pyspark package of the Python that runs waku-legacy: pip's
# pyspark ships bin/spark-class and the jars, which is all a standalone master/worker needs.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${WAKU_LEGACY_PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON="python3"; fi
fi
if [[ -z "${SPARK_HOME:-}" ]]; then
  SPARK_HOME="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
fi
export SPARK_HOME
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
# Where pid files and logs go.
SPARK_RUN_DIR="${SPARK_RUN_DIR:-${TMPDIR:-/tmp}/waku-legacy-spark}"
mkdir -p "$SPARK_RUN_DIR"
SPARK_CLASS="$SPARK_HOME/bin/spark-class"

# wait_for_port HOST PORT SECONDS: until something listens (bash /dev/tcp, no extra tools).
wait_for_port() {
  local host="$1" port="$2" deadline=$((SECONDS + $3))
  while (( SECONDS < deadline )); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then return 0; fi
    sleep 0.3
  done
  return 1
}
