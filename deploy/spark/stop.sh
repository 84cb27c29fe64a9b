#!/usr/bin/env bash
# Stop the master and workers started by these scripts (by their pid files only).
source "$(dirname "$0")/env.sh"
shopt -s nullglob
for pidfile in "$SPARK_RUN_DIR"/*.pid; do
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done
