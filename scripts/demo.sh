#!/usr/bin/env bash
# make demo: the main job on the embedded stack. Grows with each stage of the pipeline.
set -euo pipefail
BIN=${1:-bin/goldbridge}
STATE_DIR=${2:-./var}
EVENTS=${3:-200000}
CONFIG=examples/orders.yaml
gb() { "$BIN" -c "$CONFIG" --state-dir "$STATE_DIR" "$@"; }

echo "== validate $CONFIG"
gb validate

landing="$STATE_DIR/landing/orders"
if ! compgen -G "$landing/orders-*.jsonl*" >/dev/null; then
  echo "== demo generate ($EVENTS events into $landing)"
  gb demo generate --events "$EVENTS" --seed 42
else
  echo "== landing files already in $landing (delete them to regenerate)"
fi

echo "== ingest: landing files -> bronze.orders (append-only, exactly once)"
gb ingest
echo "== ingest again: nothing new to land"
gb ingest

echo "== silver: typed, quarantined, deduplicated, merged (late events never roll back)"
gb silver
echo "== silver again: nothing new, nothing changes"
gb silver
echo "== the rules registry of orders"
gb rules orders

echo "== gold: daily_revenue_kpi (ROLLUP country, category) through the data-quality gateway"
gb gold
echo "== gold again: no Silver change, nothing recomputed"
gb gold
gb freshness --max-age 1h

echo "== embedded ClickHouse: start, query, stop"
gb clickhouse query "SELECT version() AS clickhouse_version, uptime() AS uptime_s"
