#!/usr/bin/env bash
# Start a Spark standalone master in the background.
#   SPARK_MASTER_HOST (127.0.0.1)  SPARK_MASTER_PORT (7077)  SPARK_MASTER_WEBUI_PORT (8080)
# Prints the master URL (spark://host:port) once it accepts connections.
source "$(dirname "$0")/env.sh"
host="${SPARK_MASTER_HOST:-127.0.0.1}"
port="${SPARK_MASTER_PORT:-7077}"
webui="${SPARK_MASTER_WEBUI_PORT:-8080}"
log="$SPARK_RUN_DIR/master.log"
nohup "$SPARK_CLASS" org.apache.spark.deploy.master.Master \
  --host "$host" --port "$port" --webui-port "$webui" >"$log" 2>&1 &
echo $! >"$SPARK_RUN_DIR/master.pid"
if ! wait_for_port "$host" "$port" "${SPARK_START_TIMEOUT:-60}"; then
  echo "spark master did not start; see $log" >&2
  exit 1
fi
echo "spark://$host:$port"
