// DuckDB peer of the goldbridge benchmark (bench/run.sh): the same landing JSONL into
// the same Silver and Gold results, in memory, with the @duckdb/node-api package.
//
//   node bench/peers/duckdb.cjs '<glob of landing files>'
//
// Needs NODE_PATH pointing at a node_modules that holds @duckdb/node-api (bench/run.sh
// installs it under ~/.cache/goldbridge/bench, never into the repository). Prints one JSON
// object: step timings (seconds), row counts and the sanity figures of bench/run.sh.
//
// Semantics follow docs/silver.md and docs/gold.md for the orders example:
//   - a line is quarantined unless it is a JSON object with order_id, user_id and a
//     parseable updated_at, a decimal amount >= 0 (rule F1; NULL fails it), a parseable
//     created_at if present, and op in c/u/d/r;
//   - one current row per order_id: newest updated_at, then op rank d > u > c > r
//     (ROW_NUMBER); op d is a soft delete (is_deleted);
//   - Gold: not is_deleted, report_date = UTC day of created_at, ROLLUP(country,
//     category), sum(amount), count(*), exact count(DISTINCT user_id), and avg(amount)
//     rounded half away from zero to 8 digits, computed exactly in integers.
'use strict';
const { DuckDBInstance } = require('@duckdb/node-api');

const glob = process.argv[2];
if (!glob) {
  console.error('usage: duckdb.cjs <glob of landing files>');
  process.exit(2);
}
const lit = (s) => "'" + s.replaceAll("'", "''") + "'";

const silverSQL = `
CREATE TABLE silver AS
WITH raw AS (
  -- one VARCHAR per line: a delimiter, quote and escape that never occur
  SELECT line FROM read_csv(${lit(glob)}, columns = {'line': 'VARCHAR'}, delim = '\\x01',
         quote = '', escape = '', header = false, auto_detect = false, new_line = '\\n')
), parsed AS (
  SELECT json_extract_string(line, ['$.order_id', '$.user_id', '$.amount', '$.country',
         '$.category', '$.created_at', '$.updated_at', '$.op']) AS f
  FROM raw
  WHERE starts_with(line, '{') AND json_valid(line)
), typed AS (
  SELECT f[1] AS order_id, f[2] AS user_id, TRY_CAST(f[3] AS DECIMAL(18, 2)) AS amount,
         f[4] AS country, f[5] AS category, f[6] AS created_raw,
         TRY_CAST(f[6] AS TIMESTAMP) AS created_at, TRY_CAST(f[7] AS TIMESTAMP) AS updated_at,
         f[8] AS op
  FROM parsed
), good AS (
  SELECT * FROM typed
  WHERE order_id IS NOT NULL AND user_id IS NOT NULL AND updated_at IS NOT NULL
    AND amount >= 0 AND op IN ('c', 'u', 'd', 'r')
    AND (created_raw IS NULL OR created_at IS NOT NULL)
), ranked AS (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY updated_at DESC,
         CASE op WHEN 'd' THEN 4 WHEN 'u' THEN 3 WHEN 'c' THEN 2 ELSE 1 END DESC) AS rn
  FROM good
)
SELECT order_id, user_id, amount, country, category, created_at, updated_at,
       op = 'd' AS is_deleted
FROM ranked WHERE rn = 1`;

const goldSQL = `
CREATE TABLE gold AS
SELECT CAST(created_at AS DATE) AS report_date, country, category,
       GROUPING(country) AS grouping_country, GROUPING(category) AS grouping_category,
       sum(amount) AS total_revenue, count(*) AS total_orders,
       count(DISTINCT user_id) AS unique_customers,
       -- avg in units of 1e-8, rounded half away from zero (amounts are >= 0)
       (CAST(sum(amount) * 100 AS HUGEINT) * 2000000 + count(*)) // (2 * count(*)) AS avg_units
FROM silver
WHERE NOT is_deleted
GROUP BY CAST(created_at AS DATE), ROLLUP(country, category)`;

const sanitySQL = `
SELECT count(*) AS gold_rows,
       CAST(CAST(sum(total_revenue) FILTER (WHERE grouping_country = 1 AND grouping_category = 1) * 100 AS HUGEINT) AS VARCHAR) AS revenue_cents,
       CAST(sum(total_orders) FILTER (WHERE grouping_country = 1 AND grouping_category = 1) AS VARCHAR) AS orders,
       CAST(sum(unique_customers) FILTER (WHERE grouping_country = 1 AND grouping_category = 1) AS VARCHAR) AS customers_total,
       CAST(sum(unique_customers) AS VARCHAR) AS customers_all_levels,
       CAST(sum(avg_units) AS VARCHAR) AS avg_units_sum
FROM gold`;

(async () => {
  const t0 = process.hrtime.bigint();
  const secs = (a, b) => Number(b - a) / 1e9;
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  const threads = (await con.runAndReadAll("SELECT current_setting('threads') AS t")).getRowObjectsJson()[0].t;
  const version = (await con.runAndReadAll('SELECT version() AS v')).getRowObjectsJson()[0].v;
  const t1 = process.hrtime.bigint();
  await con.run(silverSQL);
  const t2 = process.hrtime.bigint();
  await con.run(goldSQL);
  const t3 = process.hrtime.bigint();
  const silverRows = (await con.runAndReadAll('SELECT count(*) AS n FROM silver')).getRowObjectsJson()[0].n;
  const sanity = (await con.runAndReadAll(sanitySQL)).getRowObjectsJson()[0];
  process.stdout.write(JSON.stringify({
    engine: 'duckdb', version, threads: String(threads),
    start_s: secs(t0, t1), silver_s: secs(t1, t2), gold_s: secs(t2, t3), total_s: secs(t0, t3),
    silver_rows: String(silverRows), sanity,
  }) + '\n');
})().catch((e) => {
  console.error('duckdb peer:', e && e.message ? e.message : e);
  process.exit(1);
});
