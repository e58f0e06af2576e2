#!/usr/bin/env bash
# make demo DATASET=events: examples/events.yaml (seed 002's append-only events, anti-join with
# the keys table) on the embedded stack, over four overlapping landings of generated app events.
set -euo pipefail
BIN=${1:-bin/goldbridge}
STATE_DIR=${2:-./var/events}
CONFIG=examples/events.yaml
gb() { "$BIN" -c "$CONFIG" --state-dir "$STATE_DIR" "$@"; }

echo "== validate $CONFIG"
gb validate
for landing in 1 2 3 4; do
  echo "== landing $landing: generated app events (half of landing $((landing - 1)) again, retries, late arrivals, re-sends)"
  gb demo generate --dataset events --landing "$landing" --seed 42
  echo "== run: ingest, silver (quarantine, dedup, anti-join, append), gold app_events_daily, sync"
  gb run
done
echo "== the quarantine, by reason"
gb query "SELECT replaceRegexpOne(error_reason, ': .*\$', '') AS reason, count() FROM silver.app_events_quarantine GROUP BY 1 ORDER BY 1"
echo "== every (event_id, source) once: rows and distinct keys of Silver"
gb query "SELECT count() AS rows, uniqExact(event_id, source) AS keys FROM silver.app_events"
echo "== check: every hot partition of Gold equals ClickHouse"
gb check
echo "== events and revenue per day and source (served)"
gb clickhouse query "
SELECT event_date, source, sum(events) AS events, sum(revenue) AS revenue
FROM marts.app_events_daily_final GROUP BY event_date, source ORDER BY event_date, source"
