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

echo "== sync: hot window (90 days) of gold.daily_revenue_kpi into ClickHouse, one atomic REPLACE PARTITION each"
gb sync
echo "== sync again: nothing changed, nothing pushed"
gb sync
echo "== check: every hot partition of Gold equals ClickHouse"
gb check

echo "== dashboard query on ClickHouse: revenue and unique customers per country, the newest 7 days"
echo "   (finished in daily_revenue_kpi_windows at each sync: serving.windows, docs/bi.md)"
newest="(SELECT max(report_date) FROM marts.daily_revenue_kpi_windows WHERE window_days = 7)"
gb clickhouse query "
SELECT report_date AS window_end, country, total_revenue, unique_customers
FROM marts.daily_revenue_kpi_windows
WHERE window_days = 7 AND grouping_level = 'by_country' AND report_date = $newest
ORDER BY total_revenue DESC
LIMIT 10"
echo "== the same from the daily states: the 7 days ending there, merged (equal to the above)"
gb clickhouse query "
WITH $newest AS window_end
SELECT country,
       sum(total_revenue)                      AS total_revenue,
       uniqExactMerge(unique_customers__state) AS unique_customers
FROM marts.daily_revenue_kpi
WHERE grouping_level = 'by_country' AND report_date BETWEEN window_end - 6 AND window_end
GROUP BY country
ORDER BY total_revenue DESC
LIMIT 10"
