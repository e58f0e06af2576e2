-- ClickHouse peer of the goldbridge benchmark (bench/run.sh): the same landing JSONL into
-- the same Silver and Gold results, on the suite's local ClickHouse 26.7 server. run.sh
-- replaces {db} and {files} (a file() glob) and sends the statements one by one over HTTP
-- (statements are separated by lines holding only ";"). Semantics: bench/peers/duckdb.cjs.
--
-- Traps avoided (../shared/clickhouse-local.md): lines are read with LineAsString and
-- parsed with one JSONExtract into a tuple (JSONEachRow with allowed errors lets a
-- truncated line swallow the next one; a JSON array would map onto the tuple by position,
-- hence startsWith '{'); avg is computed exactly in integers, not with avg() over Decimal
-- (Float64); dedup is ORDER BY + LIMIT 1 BY, not argMax over all columns.
DROP DATABASE IF EXISTS {db} SYNC
;
CREATE DATABASE {db}
;
CREATE TABLE {db}.silver ENGINE = Memory AS
SELECT order_id, user_id, amount, country, category, created_at, updated_at, op = 'd' AS is_deleted
FROM (
    SELECT t.1 AS order_id, t.2 AS user_id, t.3 AS amount, t.4 AS country, t.5 AS category,
           t.6 AS created_raw, parseDateTime64BestEffortOrNull(t.6, 6, 'UTC') AS created_at,
           parseDateTime64BestEffortOrNull(t.7, 6, 'UTC') AS updated_at, t.8 AS op
    FROM (
        SELECT JSONExtract(line, 'Tuple(order_id Nullable(String), user_id Nullable(String), amount Nullable(Decimal(18, 2)), country Nullable(String), category Nullable(String), created_at Nullable(String), updated_at Nullable(String), op Nullable(String))') AS t
        FROM file('{files}', LineAsString)
        WHERE startsWith(line, '{')
    )
)
WHERE order_id IS NOT NULL AND user_id IS NOT NULL AND updated_at IS NOT NULL
  AND amount >= 0 AND op IN ('c', 'u', 'd', 'r')
  AND (created_raw IS NULL OR created_at IS NOT NULL)
ORDER BY order_id, updated_at DESC, multiIf(op = 'd', 4, op = 'u', 3, op = 'c', 2, 1) DESC
LIMIT 1 BY order_id
;
CREATE TABLE {db}.gold ENGINE = Memory AS
SELECT toDate(created_at) AS report_date, country, category,
       grouping(country) AS grouping_country, grouping(category) AS grouping_category,
       sum(amount) AS total_revenue, count() AS total_orders,
       uniqExact(user_id) AS unique_customers,
       -- avg in units of 1e-8, rounded half away from zero (amounts are >= 0)
       intDiv(toInt256(sum(amount) * 100) * 2000000 + count(), 2 * count()) AS avg_units
FROM {db}.silver
WHERE NOT is_deleted
GROUP BY GROUPING SETS ((report_date, country, category), (report_date, country), (report_date))
SETTINGS group_by_use_nulls = 1
