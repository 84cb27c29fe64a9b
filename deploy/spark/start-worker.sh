#!/usr/bin/env bash
# Start a Spark standalone worker in the background and register it with a master.
#   start-worker.sh spark://127.0.0.1:7077
#   SPARK_WORKER_CORES (1)  SPARK_WORKER_MEMORY (1g)  SPARK_WORKER_WEBUI_PORT (8081)
#   SPARK_WORKER_HOST (127.0.0.1)  SPARK_WORKER_NAME (worker-1, names the pid and log files)
source "$(dirname "$0")/env.sh"
master="${1:?usage: start-worker.sh spark://HOST:PORT}"
name="${SPARK_WORKER_NAME:-worker-1}"
log="$SPARK_RUN_DIR/$name.log"
nohup "$SPARK_CLASS" org.apache.spark.deploy.worker.Worker \
  --host "${SPARK_WORKER_HOST:-127.0.0.1}" \
  --cores "${SPARK_WORKER_CORES:-1}" --memory "${SPARK_WORKER_MEMORY:-1g}" \
  --webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}" \
  --work-dir "$SPARK_RUN_DIR/$name-work" \
  "$master" >"$log" 2>&1 &
echo $! >"$SPARK_RUN_DIR/$name.pid"
deadline=$((SECONDS + ${SPARK_START_TIMEOUT:-60}))
until grep -q "Successfully registered with master" "$log" 2>/dev/null; do
  if (( SECONDS >= deadline )) || ! kill -0 "$(cat "$SPARK_RUN_DIR/$name.pid")" 2>/dev/null; then
    echo "spark worker did not register with $master; see $log" >&2
    exit 1
  fi
  sleep 0.3
done
echo "$name registered with $master"
