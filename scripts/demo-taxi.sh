#!/usr/bin/env bash
# make demo DATASET=taxi: examples/taxi.yaml (seed 003's yellow-taxi registry) on the embedded
# stack, over two overlapping landings of generated TLC trips.
set -euo pipefail
BIN=${1:-bin/goldbridge}
STATE_DIR=${2:-./var/taxi}
FORMAT=${3:-parquet}
CONFIG=examples/taxi.yaml
gb() { "$BIN" -c "$CONFIG" --state-dir "$STATE_DIR" "$@"; }

echo "== validate $CONFIG"
gb validate
for landing in 1 2; do
  echo "== landing $landing: generated TLC trips ($FORMAT; landing 2 repeats half of landing 1)"
  gb demo generate --dataset taxi --format "$FORMAT" --landing "$landing" --seed 42
  echo "== run: ingest, silver (F1-F3, N1-N4, E1-E3, E0), gold taxi_daily, sync"
  gb run
done
echo "== the quarantine, by reason"
gb query "SELECT error_reason, count() FROM silver.yellow_trips_quarantine GROUP BY 1 ORDER BY 1"
echo "== check: every hot partition of Gold equals ClickHouse"
gb check
echo "== trips per pickup borough, last 7 days of the data (hot_window_anchor: data)"
gb clickhouse query "
SELECT pickup_borough, sum(trips) AS trips, sum(passengers) AS passengers
FROM marts.taxi_daily_final
WHERE pickup_date >= (SELECT max(pickup_date) FROM marts.taxi_daily_final) - 7
GROUP BY pickup_borough ORDER BY trips DESC"
