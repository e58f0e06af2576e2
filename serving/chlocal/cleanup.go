package chlocal

// promptCleanupConfig is the server configuration of Options.PromptCleanup.
//
// ClickHouse deletes an outdated part (replaced by REPLACE or DROP PARTITION, merged
// away, or left in a table whose version was exchanged) from a cleanup task that a
// MergeTree table runs every cleanup_delay_period (30 s, plus up to 10 s at random,
// stretching towards 300 s while it finds little to delete), once the part is
// old_parts_lifetime old (0 in libchdb 26.7: said here all the same). A dropped table's
// data is deleted database_atomic_delay_before_drop_table_sec (480 s) after the DROP.
// The embedded server of `goldbridge run` lives for seconds, so it deleted neither:
// 180 cron runs of the orders example left 546 MB in 18,649 part directories for
// 5.5 MB of live parts. With these settings both go within about a second, and a
// server starting on a data directory deletes what its earlier lives left (the
// outdated parts it finds as it loads the tables, the tables dropped before): disk
// holds the live parts plus, between runs, what the last run replaced
// (docs/serving.md, "Disk").
//
// Readers are safe: ClickHouse deletes a part only when no query holds it (its
// refcount is 1) and a dropped table's data only when no query holds the table, so a
// query that started on a version of <t> reads it to the end. What the 8 minutes
// protect is a part written but not yet flushed by the kernel when the machine (not
// the process) loses power; this server is a cache of Gold that sync and
// `check --repair` rebuild.
const promptCleanupConfig = `  <database_atomic_delay_before_drop_table_sec>0</database_atomic_delay_before_drop_table_sec>
  <merge_tree>
    <old_parts_lifetime>0</old_parts_lifetime>
    <cleanup_delay_period>1</cleanup_delay_period>
    <max_cleanup_delay_period>1</max_cleanup_delay_period>
    <cleanup_delay_period_random_add>0</cleanup_delay_period_random_add>
  </merge_tree>
`
