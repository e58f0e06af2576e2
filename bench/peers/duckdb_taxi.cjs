// DuckDB peer of the Parquet benchmark (bench/parquet.sh): examples/taxi.yaml's Silver and
// Gold over the same Parquet landings, with the @duckdb/node-api package, both written to
// Parquet as goldbridge writes its tables (zstd).
//
//   node bench/peers/duckdb_taxi.cjs '<glob of landing Parquet files>' <zone lookup CSV> <out dir>
//
// Needs NODE_PATH pointing at a node_modules that holds @duckdb/node-api (bench/parquet.sh
// installs it under ~/.cache/goldbridge/bench). Prints one JSON object: step timings
// (seconds), row counts and the sanity figures bench/parquet.sh compares with goldbridge.
//
// Semantics follow examples/taxi.yaml (docs/silver.md, docs/gold.md):
//   - quarantined: a NULL or negative fare (F1), a total over 1000 (F2), a pickup outside
//     2024 (F3), a passenger count that is not a whole number (N1 to int32);
//   - a trip is its (VendorID, pickup, dropoff, PU, DO, fare, total): one row per trip, a
//     trip delivered again is a duplicate (E0, append mode; the generator's re-deliveries
//     are the same rows, so which one is kept does not matter);
//   - passenger_count NULL -> 0, RatecodeID NULL -> 99, surcharge and fee NULL -> 0 (N1-N4);
//     trip_duration_minutes (E1); pickup and dropoff borough and zone from the lookup (E2, E3);
//   - Gold: per UTC pickup day, pickup borough and VendorID (grouping none): trips,
//     sum(passenger_count), max(total_amount), sum(Airport_fee).
'use strict';
const { DuckDBInstance } = require('@duckdb/node-api');

const [glob, zones, out] = process.argv.slice(2);
if (!glob || !zones || !out) {
  console.error('usage: duckdb_taxi.cjs <glob of landing Parquet files> <zone lookup CSV> <out dir>');
  process.exit(2);
}
const lit = (s) => "'" + s.replaceAll("'", "''") + "'";

const silverSQL = `
CREATE TABLE silver AS
WITH good AS (
  SELECT * FROM read_parquet(${lit(glob)})
  WHERE fare_amount IS NOT NULL AND fare_amount >= 0
    AND total_amount <= 1000
    AND tpep_pickup_datetime >= TIMESTAMP '2024-01-01' AND tpep_pickup_datetime < TIMESTAMP '2025-01-01'
    AND (passenger_count IS NULL OR passenger_count = trunc(passenger_count))
), trips AS (
  SELECT DISTINCT ON (VendorID, tpep_pickup_datetime, tpep_dropoff_datetime, PULocationID, DOLocationID,
         fare_amount, total_amount) *
  FROM good
), zones AS (
  SELECT * FROM read_csv(${lit(zones)}, header = true, columns = {'LocationID': 'BIGINT', 'Borough': 'VARCHAR', 'Zone': 'VARCHAR'})
)
SELECT t.VendorID, t.tpep_pickup_datetime, t.tpep_dropoff_datetime,
       CAST(coalesce(t.passenger_count, 0) AS INTEGER) AS passenger_count,
       CAST(coalesce(t.RatecodeID, 99) AS INTEGER) AS RatecodeID,
       t.PULocationID, t.DOLocationID, t.fare_amount, t.total_amount,
       coalesce(t.congestion_surcharge, 0.0) AS congestion_surcharge, coalesce(t.Airport_fee, 0.0) AS Airport_fee,
       epoch(t.tpep_dropoff_datetime - t.tpep_pickup_datetime) / 60 AS trip_duration_minutes,
       pz.Borough AS pickup_borough, pz.Zone AS pickup_zone, dz.Borough AS dropoff_borough, dz.Zone AS dropoff_zone
FROM trips t
LEFT JOIN zones pz ON t.PULocationID = pz.LocationID
LEFT JOIN zones dz ON t.DOLocationID = dz.LocationID`;

const goldSQL = `
CREATE TABLE gold AS
SELECT CAST(tpep_pickup_datetime AS DATE) AS pickup_date, pickup_borough, VendorID,
       count(*) AS trips, sum(passenger_count) AS passengers, max(total_amount) AS max_total,
       sum(Airport_fee) AS Airport_fee
FROM silver
GROUP BY ALL`;

// Money as integer cents, so that the sums do not depend on the order of addition.
const sanitySQL = `
SELECT CAST(count(*) AS VARCHAR) AS gold_rows, CAST(sum(trips) AS VARCHAR) AS trips,
       CAST(sum(passengers) AS VARCHAR) AS passengers,
       CAST(sum(CAST(round(max_total * 100) AS BIGINT)) AS VARCHAR) AS max_total_cents,
       CAST(sum(CAST(round(Airport_fee * 100) AS BIGINT)) AS VARCHAR) AS fee_cents
FROM gold`;

(async () => {
  const t0 = process.hrtime.bigint();
  const secs = (a, b) => Number(b - a) / 1e9;
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  await con.run("SET TimeZone = 'UTC'");
  const threads = (await con.runAndReadAll("SELECT current_setting('threads') AS t")).getRowObjectsJson()[0].t;
  const version = (await con.runAndReadAll('SELECT version() AS v')).getRowObjectsJson()[0].v;
  const t1 = process.hrtime.bigint();
  await con.run(silverSQL);
  await con.run(`COPY silver TO ${lit(out + '/silver.parquet')} (FORMAT parquet, COMPRESSION zstd)`);
  const t2 = process.hrtime.bigint();
  await con.run(goldSQL);
  await con.run(`COPY gold TO ${lit(out + '/gold.parquet')} (FORMAT parquet, COMPRESSION zstd)`);
  const t3 = process.hrtime.bigint();
  const silverRows = (await con.runAndReadAll('SELECT count(*) AS n FROM silver')).getRowObjectsJson()[0].n;
  const sanity = (await con.runAndReadAll(sanitySQL)).getRowObjectsJson()[0];
  process.stdout.write(JSON.stringify({
    engine: 'duckdb', version, threads: String(threads),
    start_s: secs(t0, t1), silver_s: secs(t1, t2), gold_s: secs(t2, t3), total_s: secs(t0, t3),
    silver_rows: String(silverRows), sanity,
  }) + '\n');
})().catch((e) => {
  console.error('duckdb taxi peer:', e && e.message ? e.message : e);
  process.exit(1);
});
