#!/usr/bin/env bash
# make bench: the whole chain measured side by side with DuckDB and ClickHouse on the same
# input, in one run, printed as one table and appended to bench/results/<date>.md.
#
#   bench/run.sh [BIN]                      BIN defaults to bin/goldbridge
#
# Environment:
#   BENCH_EVENTS=N     demo events of the full build (default 10000000)
#   BENCH_QUICK=1      the CI size: 200000 events unless BENCH_EVENTS is set
#   BENCH_DIR=dir      work directory (default bench/data, git-ignored); wiped at start
#   BENCH_KEEP=1       keep the generated data and state dirs after the run
#   BENCH_PROFILE=1    CPU + heap profile of the full goldbridge `run` (pprof overhead ~1%)
#   BENCH_RESULTS=dir  where <date>.md goes (default bench/results)
#   BENCH_SCALE=1     instead: the incremental and no-change runs at 1M/3M/10M stored events
#                      (bench/scale.sh, its own knobs documented there)
#   BENCH_SOAK=N       instead: a cron life of N one-file runs against the same files landed
#                      at once (bench/soak.sh, its own knobs documented there)
#   BENCH_PARQUET=N    instead: examples/taxi.yaml over two Parquet landings of N trips
#                      against DuckDB doing the same (bench/parquet.sh)
#   BENCH_SETTLE=s     pause after flushing dirty pages before each timed step
#                      (default 2; 0 with BENCH_QUICK, whose timings are not judged)
#   BENCH_BI_SECS=s    load time of each side of the BI latency step (default 20; 2 with
#                      BENCH_QUICK); BENCH_BI_CLIENTS="n ..." its numbers of concurrent
#                      clients (default "16 64 256"), BENCH_BI_PROTOCOLS the interfaces
#                      (default "native http"), BENCH_BI_DISTINCT the served layout of
#                      the distinct counts the dashboards read (default bitmap),
#                      BENCH_BI_PARTITION their mart's serving.partition_by (default
#                      month: the dashboards' layout docs/bi.md recommends),
#                      BENCH_BI_WINDOWS=0 to ask the questions over several days of the
#                      merged daily states rather than of the rolling windows served
#                      finished (default 1: serving.windows days [7, 30], levels total
#                      and by_country, docs/bi.md)
#   BENCH_CODEC=c      lakehouse.compression of every layer's tables as "bronze silver gold"
#                      codecs (e.g. "lz4raw zstd zstd"; default: the config's, zstd level 1)
#                      (the Parquet pipeline of BENCH_PARQUET too)
#   GOLDBRIDGE_CACHE   cache root (default ~/.cache/goldbridge): DuckDB's npm package
#
# Input: `goldbridge demo generate --seed 42 --end 2026-06-30` of N + N/1000 events; the
# last N/1000 lines (the newest 0.1% of the stream) are held back and landed after the
# full build for the incremental run. Fixed seed and end date: the same N gives the same
# bytes on every machine.
#
# Stages measured, each as its own process under /usr/bin/time -v (wall time, peak RSS):
#   duckdb       @duckdb/node-api in memory: read JSONL, parse, quarantine, ROW_NUMBER
#                dedup, ROLLUP mart (bench/peers/duckdb.cjs)
#   clickhouse   the same SQL on the suite's ClickHouse 26.7 server (bench/peers/clickhouse.sql)
#   goldbridge   ingest, silver, gold, sync (fresh state dir); run (another fresh state
#                dir); incremental run with the held-back 0.1% landed on top
#   ceiling      ClickHouse's own bulk insert of the rows sync pushed (Native, 2 streams)
# and the peers again on base + 0.1%, which they recompute from scratch. Then the BI
# latency, hot vs cold (bench/bilat): docs/bi.md's dashboard questions from 16, 64 and
# 256 concurrent clients over the native and the HTTP interface, of the served mart
# (<mart>_final, its states) and of the Gold Iceberg table through ClickHouse's Iceberg
# reader (icebergLocal), on the same server, in 4 alternating rounds per side; both sides
# must give the same answer to every question. Then the freshness panel's query alone. The
# hot side asks as a clickhouse.local.readers user (bi), as a dashboard does.
#
# Every result is checked: the peers and goldbridge (its served ClickHouse view) must agree
# on Gold's row count, total revenue, orders, distinct customers and exact averages, and
# `goldbridge check` must find no drift. A mismatch or any failing command exits 1; timings
# never fail the suite.
set -euo pipefail
trap 'echo "bench: failed at line $LINENO (exit $?)" >&2' ERR

cd "$(dirname "$0")/.."
root=$PWD
BIN=${1:-${BENCH_BIN:-bin/goldbridge}}
[[ "$BIN" == /* ]] || BIN="$root/$BIN"
CONFIG="$root/bench/orders.yaml"
SEED=42
END=2026-06-30
if [[ "${BENCH_SCALE:-}" == 1 ]]; then
	exec "$root/bench/scale.sh" "$BIN"
fi
if [[ -n "${BENCH_SOAK:-}" ]]; then
	exec "$root/bench/soak.sh" "$BIN"
fi
if [[ -n "${BENCH_PARQUET:-}" ]]; then
	exec "$root/bench/parquet.sh" "$BIN"
fi

if [[ -n "${BENCH_EVENTS:-}" ]]; then
	N=$BENCH_EVENTS
elif [[ "${BENCH_QUICK:-}" == 1 ]]; then
	N=200000
else
	N=10000000
fi
SETTLE=${BENCH_SETTLE:-2}
[[ -n "${BENCH_SETTLE:-}" || "${BENCH_QUICK:-}" != 1 ]] || SETTLE=0
BI_SECS=${BENCH_BI_SECS:-20}
[[ -n "${BENCH_BI_SECS:-}" || "${BENCH_QUICK:-}" != 1 ]] || BI_SECS=2
BI_CLIENTS=${BENCH_BI_CLIENTS:-16 64 256}
BI_EACH=${BENCH_BI_EACH_SECS:-3} # each hot question alone, for its server CPU per query
[[ -n "${BENCH_BI_EACH_SECS:-}" || "${BENCH_QUICK:-}" != 1 ]] || BI_EACH=1
BI_PROTOCOLS=${BENCH_BI_PROTOCOLS:-native http}
BI_DISTINCT=${BENCH_BI_DISTINCT:-bitmap}
BI_PARTITION=${BENCH_BI_PARTITION:-month}
BI_WINDOWS=${BENCH_BI_WINDOWS:-1}
[[ "$BI_WINDOWS" =~ ^[01]$ ]] || {
	echo "bench: BENCH_BI_WINDOWS must be 0 or 1, got '$BI_WINDOWS'" >&2
	exit 2
}
[[ "$BI_PARTITION" =~ ^(day|month)$ ]] || {
	echo "bench: BENCH_BI_PARTITION must be day or month, got '$BI_PARTITION'" >&2
	exit 2
}
[[ "$BI_DISTINCT" =~ ^(uniqExact|uniq|bitmap)$ ]] || {
	echo "bench: BENCH_BI_DISTINCT must be uniqExact, uniq or bitmap, got '$BI_DISTINCT'" >&2
	exit 2
}
if ! [[ "$N" =~ ^[0-9]+$ ]] || ((N < 10000)); then
	echo "bench: BENCH_EVENTS must be a number >= 10000, got '$N'" >&2
	exit 2
fi
TAIL=$((N / 1000))
M=$((N + TAIL))
FILES=$(((N + 249999) / 250000)) # the generator's default: one file per 250k events

W=${BENCH_DIR:-$root/bench/data}
[[ "$W" == /* ]] || W="$root/$W"
RESULTS=${BENCH_RESULTS:-$root/bench/results}

die() {
	echo "bench: $*" >&2
	exit 1
}
log() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- prerequisites
[[ -x "$BIN" ]] || die "$BIN not found: run make build (or pass the binary)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian: apt-get install time)"
for c in node npm curl jq awk; do
	command -v "$c" >/dev/null || die "$c is required"
done
"$root/scripts/clickhouse.sh" >/dev/null || die "libchdb is missing (make clickhouse)"

NODE_PATH=$("$root/bench/duckdb.sh") || die "DuckDB's npm package could not be installed"
export NODE_PATH
command -v go >/dev/null || die "go is required (bench/bilat, the BI load generator)"

# Disk: ~0.4 KB per event measured at 1M (landing 0.21, each state dir 0.07, ClickHouse
# 0.05); ask for 1 KB per event and 1 GB more.
need_kb=$((M + 1048576))
mkdir -p "$W"
avail_kb=$(df -Pk "$W" | awk 'NR == 2 {print $4}')
((avail_kb > need_kb)) || die "$W: $((avail_kb / 1024)) MB free, about $((need_kb / 1024)) MB needed for $N events"

# ---------------------------------------------------------------- helpers
rm -rf "$W/run"
R="$W/run"
mkdir -p "$R/gen" "$R/landing/base" "$R/landing/full" "$R/logs"
if [[ -n "${BENCH_CODEC:-}" ]]; then
	read -r cb cs cg <<<"$BENCH_CODEC"
	[[ -n "$cg" ]] || die "BENCH_CODEC wants three codecs (bronze silver gold), got '$BENCH_CODEC'"
	sed "s|^  warehouse: \(.*\)\$|  warehouse: \1\n  compression: {bronze: \"$cb\", silver: \"$cs\", gold: \"$cg\"}|" "$CONFIG" >"$R/orders.yaml"
	grep -q '^  compression:' "$R/orders.yaml" || die "BENCH_CODEC: no lakehouse.warehouse line in $CONFIG"
	CONFIG="$R/orders.yaml"
fi
log "build bench/bilat (the BI load generator)"
go build -o "$R/bilat" "$root/bench/bilat" || die "go build ./bench/bilat failed"

# settle: flush dirty pages and pause, so that a timed step does not pay for the
# write-back of the step before it (a full build leaves ~1 GB of dirty pages).
settle() {
	sync
	sleep "$SETTLE"
}

# measure NAME CMD...: runs CMD under /usr/bin/time -v with stdout/stderr in logs/NAME.*
# (after settle); sets SECS (wall, ms resolution) and RSS_KB; a failing command ends
# the suite.
measure() {
	local name=$1
	shift
	local t0 t1
	settle
	t0=$(date +%s%N)
	if ! /usr/bin/time -v -o "$R/logs/$name.time" "$@" >"$R/logs/$name.out" 2>"$R/logs/$name.err"; then
		echo "bench: $name failed: $*" >&2
		tail -n 20 "$R/logs/$name.err" "$R/logs/$name.out" >&2
		exit 1
	fi
	t1=$(date +%s%N)
	SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
	RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$R/logs/$name.time")
}

free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free port found"
}

# Rows of the table: name|rows|secs|rss_kb|input the ratios compare with (base, full, or - for none)
rows=()
add_row() { rows+=("$1|$2|$3|$4|$5"); }

# ---------------------------------------------------------------- input
log "generate $M events (seed $SEED, end $END, $FILES files); the last $TAIL are landed later"
measure generate "$BIN" --state-dir "$R" demo generate --events "$M" --seed "$SEED" --end "$END" --files "$FILES" --out "$R/gen"
gen_secs=$SECS
shopt -s nullglob
gen=("$R"/gen/orders-*.jsonl)
((${#gen[@]} == FILES)) || die "expected $FILES generated files, found ${#gen[@]}"
last=${gen[-1]}
lines=$(wc -l <"$last")
head -n $((lines - TAIL)) "$last" >"$last.base"
tail -n "$TAIL" "$last" >"$R/gen/orders-99999.jsonl.tail"
mv "$last.base" "$last"
for f in "${gen[@]}"; do
	ln "$f" "$R/landing/base/"
	ln "$f" "$R/landing/full/"
done
ln "$R/gen/orders-99999.jsonl.tail" "$R/landing/full/orders-99999.jsonl"
base_lines=$(cat "$R"/landing/base/*.jsonl | wc -l)
full_lines=$(cat "$R"/landing/full/*.jsonl | wc -l)
((base_lines == N && full_lines == M)) || die "landing split: $base_lines + $((full_lines - base_lines)) lines, want $N + $TAIL"
input_mb=$(du -smL "$R/landing/base" | awk '{print $1}')

# ---------------------------------------------------------------- ClickHouse server
export GB_BENCH_CH_PATH="$R/clickhouse" GB_BENCH_CH_TCP GB_BENCH_CH_HTTP
GB_BENCH_CH_TCP=$(free_port)
GB_BENCH_CH_HTTP=$(free_port)
[[ "$GB_BENCH_CH_TCP" != "$GB_BENCH_CH_HTTP" ]] || GB_BENCH_CH_HTTP=$(free_port)
CH="http://127.0.0.1:$GB_BENCH_CH_HTTP"
log "start ClickHouse 26.7 (tcp $GB_BENCH_CH_TCP, http $GB_BENCH_CH_HTTP)"
# It reads the landing files (the ClickHouse peer) and the `run` state dir's warehouse
# (the BI step's cold side: icebergLocal reads under its working directory, $R). The
# warehouse directory must exist before the server confines itself to it.
mkdir -p "$R/state-run/warehouse"
# Its config declares the BI step's reader: a clickhouse.local.readers user that can read
# the served database gb_bi only (the BI step's copy of the run's mart), as a
# dashboard's login (password generated into $R/clickhouse-bi.password on first start).
cat >"$R/serve.yaml" <<EOF
version: 1
clickhouse:
  embedded: true
  database: gb_bi
  local:
    readers:
      - {name: bi}
EOF
"$BIN" --state-dir "$R" -c "$R/serve.yaml" clickhouse serve --path "$GB_BENCH_CH_PATH" --dir "$R" \
	--read-dir "$R/landing" --read-dir "$R/state-run/warehouse" \
	--tcp-port "$GB_BENCH_CH_TCP" --http-port "$GB_BENCH_CH_HTTP" >"$R/logs/clickhouse.out" 2>&1 &
chpid=$!
stop_ch() {
	if [[ -n "${chpid:-}" ]] && kill -0 "$chpid" 2>/dev/null; then
		kill -TERM "$chpid" 2>/dev/null || true
		wait "$chpid" 2>/dev/null || true
	fi
}
cleanup() {
	stop_ch
	if [[ "${BENCH_KEEP:-}" != 1 ]]; then
		rm -rf "$R/gen" "$R/landing" "$R/state-"* "$R/clickhouse" "$R/ceiling-"*
	fi
}
trap cleanup EXIT
for _ in $(seq 300); do
	[[ "$(curl -s "$CH/ping" || true)" == "Ok." ]] && break
	kill -0 "$chpid" 2>/dev/null || { cat "$R/logs/clickhouse.out" >&2; die "ClickHouse did not start"; }
	sleep 0.1
done
[[ "$(curl -s "$CH/ping" || true)" == "Ok." ]] || die "ClickHouse did not answer /ping"
# `clickhouse serve` supervises the server in a child process: its RSS and CPU are the
# newest descendant's, not the supervisor's ($chpid, which is what is stopped).
srvpid=$chpid
while kid=$(pgrep -n -P "$srvpid"); do srvpid=$kid; done
# The server's admin password, generated on its first start; curl reads it from a 0600
# file (-K), never from its command line.
export GB_BENCH_CH_PASSWORD_FILE="$R/clickhouse.password"
[[ -s "$GB_BENCH_CH_PASSWORD_FILE" ]] || die "no $GB_BENCH_CH_PASSWORD_FILE"
(umask 077 && printf 'user = "goldbridge:%s"\n' "$(cat "$GB_BENCH_CH_PASSWORD_FILE")" >"$R/curl-auth")

# chq SQL [FORMAT]: one statement over HTTP; an error ends the suite.
chq() {
	local out
	if ! out=$(curl -sS -K "$R/curl-auth" --fail-with-body --data-binary "$1" "$CH/?default_format=${2:-TSV}&async_insert=0"); then
		die "clickhouse: ${1:0:200}...: $out"
	fi
	printf '%s' "$out"
}
ch_vm() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$srvpid/status"; }

# ---------------------------------------------------------------- peers
# sanity JSON of every engine: one line each, compared at the end; peers' seconds
declare -A sanity peer_secs

duckdb_peer() { # label landing-dir
	log "duckdb: $2 (in memory)"
	measure "duckdb-$1" node "$root/bench/peers/duckdb.cjs" "$R/landing/$2/*.jsonl"
	local j
	j=$(cat "$R/logs/duckdb-$1.out")
	sanity[duckdb_$1]=$(jq -cS .sanity <<<"$j")
	DUCK_VERSION=$(jq -r .version <<<"$j")
	add_row "duckdb $1 (SQL, in memory)" "$3" "$SECS" "$RSS_KB" "-"
	peer_secs[duckdb_$1]=$SECS
}

clickhouse_peer() { # label landing-dir rows
	log "clickhouse: $2 (SQL on the server)"
	local db="bench_peer_$1" stmts t0 t1 hwm
	mapfile -d $'\x1e' -t stmts < <(sed -e "s#{db}#$db#g" -e "s#{files}#$R/landing/$2/*.jsonl#g" \
		"$root/bench/peers/clickhouse.sql" | grep -v '^--' | awk 'BEGIN {RS = "\n;\n"; ORS = "\x1e"} NF {print}')
	((${#stmts[@]} == 4)) || die "bench/peers/clickhouse.sql: expected 4 statements, got ${#stmts[@]}"
	chq "${stmts[0]}" >/dev/null
	chq "${stmts[1]}" >/dev/null
	echo 5 >"/proc/$srvpid/clear_refs" # reset the server's peak RSS to its current RSS
	settle
	t0=$(date +%s%N)
	chq "${stmts[2]}" >/dev/null
	chq "${stmts[3]}" >/dev/null
	t1=$(date +%s%N)
	hwm=$(ch_vm VmHWM)
	SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
	sanity[clickhouse_$1]=$(chq "SELECT count() AS gold_rows,
		toString(toInt128(sumIf(total_revenue, grouping_country = 1 AND grouping_category = 1) * 100)) AS revenue_cents,
		toString(sumIf(total_orders, grouping_country = 1 AND grouping_category = 1)) AS orders,
		toString(sumIf(unique_customers, grouping_country = 1 AND grouping_category = 1)) AS customers_total,
		toString(sum(unique_customers)) AS customers_all_levels,
		toString(sum(avg_units)) AS avg_units_sum
		FROM $db.gold" JSONEachRow | jq -cS '.gold_rows |= tostring')
	add_row "clickhouse $1 (SQL on the server)" "$3" "$SECS" "$hwm" "-"
	peer_secs[clickhouse_$1]=$SECS
	chq "DROP DATABASE $db SYNC" >/dev/null
}

duckdb_peer base base "$N"
clickhouse_peer base base "$N"

# ---------------------------------------------------------------- goldbridge
gb_sanity() { # database
	chq "SELECT count() AS gold_rows,
		toString(toInt128(sumIf(total_revenue, grouping_level = 'total') * 100)) AS revenue_cents,
		toString(sumIf(total_orders, grouping_level = 'total')) AS orders,
		toString(sumIf(unique_customers, grouping_level = 'total')) AS customers_total,
		toString(sum(unique_customers)) AS customers_all_levels,
		toString(toInt128(sum(avg_order_value) * 100000000)) AS avg_units_sum
		FROM $1.daily_revenue_kpi_final" JSONEachRow | jq -cS '.gold_rows |= tostring'
}
# first number matched by an extended regex group in a log, or "?"
grab() {
	local v
	v=$(sed -nE "s/.*$2.*/\1/p" "$R/logs/$1.out" | sed -n 1p)
	echo "${v:-?}"
}

# push_field LOG FIELD: one field's value in the "push" line a debug-level `sync` logged
# (seconds, or <step>_s: the wall time of one step of serving/push.Steps).
push_field() {
	awk -v key="$2" '/msg=push / {
		for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) { printf "%.3f", substr($i, length(key) + 2); exit } }' "$R/logs/$1.err"
}

# stage_split: seconds of each stage of the last `run`, from its metrics textfile.
stage_split() {
	awk -F'[{} ]' '/^goldbridge_stage_duration_seconds_sum/ {
		split($2, kv, ","); st = ""
		for (i in kv) if (kv[i] ~ /^stage=/) { st = kv[i]; gsub(/stage=|"/, "", st) }
		sec[st] += $NF
	}
	END { n = split("ingest silver gold sync", o, " "); s = ""
		for (i = 1; i <= n; i++) if (o[i] in sec) s = s sprintf("%s%s %.2fs", (s == "" ? "" : ", "), o[i], sec[o[i]])
		print (s == "" ? "n/a" : s) }' "$GB_STATE/metrics.prom" 2>/dev/null || echo "n/a"
}
gb_env() { # state-name landing-dir database
	export GB_BENCH_LANDING="$R/state-$1/landing" GB_BENCH_DB="$3"
	GB_STATE="$R/state-$1"
	mkdir -p "$GB_BENCH_LANDING"
}
gb() { # log-name state-name args...
	local name=$1 st=$2
	shift 2
	measure "$name" "$BIN" -c "$CONFIG" --state-dir "$R/state-$st" "$@"
}

log "goldbridge: ingest, silver, gold, sync (fresh state dir)"
gb_env stages base gb_stages
ln "$R"/landing/base/*.jsonl "$GB_BENCH_LANDING/"
gb ingest stages ingest
add_row "goldbridge ingest" "$(grab ingest ', ([0-9]+) rows,')" "$SECS" "$RSS_KB" base
stage_sum=$SECS
gb silver stages silver
silver_rows=$(grab silver ': ([0-9]+) bronze rows') silver_secs=$SECS silver_rss=$RSS_KB
add_row "goldbridge silver" "$silver_rows" "$SECS" "$RSS_KB" base
stage_sum=$(awk -v a="$stage_sum" -v b="$SECS" 'BEGIN {print a + b}')
gb gold stages gold
gold_rows=$(grab gold '-> ([0-9]+) gold rows')
add_row "goldbridge gold" "$gold_rows" "$SECS" "$RSS_KB" base
stage_sum=$(awk -v a="$stage_sum" -v b="$SECS" 'BEGIN {print a + b}')
gb sync stages sync
sync_rows=$(grab sync 'partitions \(([0-9]+) rows\)')
sync_secs=$SECS
sync_stage_secs=$(grab sync 'dropped [0-9]+, ([0-9.]+)s') # Sync itself: plan, push, record (no process start, catalog, lock)
add_row "goldbridge sync" "$sync_rows" "$SECS" "$RSS_KB" base
stage_sum=$(awk -v a="$stage_sum" -v b="$SECS" 'BEGIN {print a + b}')
sanity[goldbridge_stages]=$(gb_sanity gb_stages)

log "ceiling: ClickHouse's own bulk insert of the rows sync pushed (Native, 2 streams)"
# sync wrote the mart's rows as ClickHouse stores them (every level, uniqExact states
# built by goldbridge): the ceiling loads exactly those rows, exported from the table.
chq "DROP DATABASE IF EXISTS bench_ceiling SYNC" >/dev/null
chq "CREATE DATABASE bench_ceiling" >/dev/null
chq "CREATE TABLE bench_ceiling.src ENGINE = Memory AS SELECT * FROM gb_stages.daily_revenue_kpi" >/dev/null
ceil_rows=$(chq "SELECT count() FROM bench_ceiling.src")
[[ "$sync_rows" == "?" || "$ceil_rows" == "$sync_rows" ]] ||
	die "ceiling: ClickHouse holds $ceil_rows rows of the mart, sync reported $sync_rows pushed"
for half in 0 1; do
	curl -sS -K "$R/curl-auth" --fail --data-binary "SELECT * FROM bench_ceiling.src WHERE toRelativeDayNum(report_date) % 2 = $half ORDER BY report_date FORMAT Native" \
		-o "$R/ceiling-$half.native" "$CH/" || die "ceiling: exporting the rows failed"
done
# ceiling_insert: one timed load of the exported rows into an empty copy of the staging
# table, in 2 streams; sets CEIL_SECS.
ceiling_insert() {
	chq "DROP TABLE IF EXISTS bench_ceiling.mart SYNC" >/dev/null
	chq "CREATE TABLE bench_ceiling.mart AS gb_stages.daily_revenue_kpi__staging" >/dev/null
	local t0 t1 p fail=0 pids=()
	settle
	t0=$(date +%s%N)
	for half in 0 1; do
		curl -sS -K "$R/curl-auth" --fail-with-body --data-binary "@$R/ceiling-$half.native" \
			"$CH/?async_insert=0&query=$(jq -rn --arg q "INSERT INTO bench_ceiling.mart FORMAT Native" '$q | @uri')" \
			>"$R/logs/ceiling-$half.out" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || fail=1
	done
	((fail == 0)) || die "ceiling insert failed: $(cat "$R"/logs/ceiling-*.out)"
	t1=$(date +%s%N)
	CEIL_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
	[[ "$(chq "SELECT count() FROM bench_ceiling.mart")" == "$ceil_rows" ]] || die "ceiling: row count after insert differs"
}
ceiling_insert
ceil_secs=$CEIL_SECS
add_row "clickhouse bulk insert of the synced rows (ceiling)" "$ceil_rows" "$ceil_secs" "" "-"

# One push and one ceiling are a few seconds each and move with the host's load: three
# more rounds, each a forced re-push of every partition (the same rows, through the same
# staging and exchange) right before a ceiling load, give medians to compare.
log "push vs ceiling: 3 interleaved rounds of sync --force and the ceiling load"
push_rounds=() ceil_rounds=()
declare -A step_rounds=()
push_steps="plan clear stage states replace mark record cleanup"
for round in 1 2 3; do
	# At debug level sync logs the push's wall time per step (serving/push.Steps).
	gb "resync-$round" stages --log-level debug sync --force
	total=$(grab "resync-$round" 'dropped [0-9]+, ([0-9.]+)s')
	push_rounds+=("$total")
	# plan: the sync's time before the push (its reported seconds minus the push's)
	step_rounds[plan]+="$(awk -v a="$total" -v b="$(push_field "resync-$round" seconds)" 'BEGIN {printf "%.3f", a - b}') "
	for st in ${push_steps#plan }; do
		step_rounds[$st]+="$(push_field "resync-$round" "${st}_s") "
	done
	ceiling_insert
	ceil_rounds+=("$CEIL_SECS")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
push_med=$(median "${push_rounds[@]}")
ceil_med=$(median "${ceil_rounds[@]}")
step_meds=""
for st in $push_steps; do
	# shellcheck disable=SC2086 # the rounds' values, one word each
	step_meds+="${step_meds:+, }$st $(median ${step_rounds[$st]})"
done
chq "DROP DATABASE bench_ceiling SYNC" >/dev/null
rm -f "$R"/ceiling-*.native

log "goldbridge: run (fresh state dir)"
gb_env run base gb_run
ln "$R"/landing/base/*.jsonl "$GB_BENCH_LANDING/"
prof=()
if [[ "${BENCH_PROFILE:-}" == 1 ]]; then
	prof=(--cpuprofile "$R/logs/run.cpu.pprof" --memprofile "$R/logs/run.mem.pprof")
fi
gb run run "${prof[@]}" run
run_split=$(stage_split)
run_secs=$SECS
run_rss=$RSS_KB
add_row "goldbridge run (full build)" "$N" "$SECS" "$RSS_KB" base
sanity[goldbridge_run]=$(gb_sanity gb_run)

log "goldbridge: incremental run (+$TAIL events)"
ln "$R/landing/full/orders-99999.jsonl" "$GB_BENCH_LANDING/"
gb incr run run
incr_split=$(stage_split)
incr_secs=$SECS
add_row "goldbridge run, incremental +0.1%" "$TAIL" "$SECS" "$RSS_KB" full
sanity[goldbridge_incremental]=$(gb_sanity gb_run)

duckdb_peer full full "$M"
clickhouse_peer full full "$M"

log "goldbridge check (Gold in Iceberg == ClickHouse, every partition)"
gb_env stages base gb_stages
gb check-stages stages check
gb_env run base gb_run
gb check-run run check

# ---------------------------------------------------------------- BI latency
# The served mart the dashboards read: the run's Gold pushed once more, into gb_bi, with
# serving.partition_by: $BI_PARTITION and serving.distinct: $BI_DISTINCT
# (BENCH_BI_PARTITION, BENCH_BI_DISTINCT; month and bitmap by default, the layout
# docs/bi.md recommends for dashboards over many days) from a copy of the run's state
# dir (its Gold files shared, its catalog and push record its own); the push goals
# above measure the default layout (uniqExact, states built by goldbridge).
bi_windows="" # the serving.windows line and bilat's flag
bi_windows_flag=()
if [[ $BI_WINDOWS == 1 ]]; then
	bi_windows='\n      windows: {days: [7, 30], levels: [total, by_country]}'
	bi_windows_flag=(-windows)
fi
log "BI: the run's mart served with distinct: $BI_DISTINCT, partition_by: $BI_PARTITION, windows: $BI_WINDOWS into gb_bi"
mkdir -p "$R/state-bi"
cp -al "$R/state-run/landing" "$R/state-run/warehouse" "$R/state-bi/"
cp "$R/state-run/catalog.db" "$R/state-bi/"
sed "s/^      partition_by: day\$/      partition_by: $BI_PARTITION\n      distinct: $BI_DISTINCT$bi_windows/" "$CONFIG" >"$R/bi.yaml"
grep -q "distinct: $BI_DISTINCT" "$R/bi.yaml" || die "bi.yaml: no serving.distinct line"
[[ $BI_WINDOWS == 0 ]] || grep -q "windows: {days" "$R/bi.yaml" || die "bi.yaml: no serving.windows line"
gb_env bi base gb_bi
measure sync-bi "$BIN" -c "$R/bi.yaml" --state-dir "$R/state-bi" sync
bi_sync=$(grep -m1 '^sync ' "$R/logs/sync-bi.out" || true)
measure check-bi "$BIN" -c "$R/bi.yaml" --state-dir "$R/state-bi" check

# Each number of concurrent clients over each interface (issue 39: 16, 64 and 256 over
# the native and the HTTP interface), hot vs cold, then the freshness panel's query alone.
# Goal 6's row is the first combination (BENCH_BI_CLIENTS' first number, native).
bi_matrix=()
for proto in $BI_PROTOCOLS; do
	addr=127.0.0.1:$GB_BENCH_CH_TCP
	[[ $proto != http ]] || addr=127.0.0.1:$GB_BENCH_CH_HTTP
	for n in $BI_CLIENTS; do
		log "BI latency ($proto): $n clients × ${BI_SECS}s each side, hot (gb_bi.daily_revenue_kpi_final, its states or windows) vs cold (Gold via icebergLocal), then the freshness query"
		measure "bilat-$proto-$n" "$R/bilat" -addr "$addr" -protocol "$proto" -user goldbridge -password-file "$GB_BENCH_CH_PASSWORD_FILE" \
			-reader bi -reader-password-file "$R/clickhouse-bi.password" \
			-db gb_bi -mart daily_revenue_kpi -iceberg "icebergLocal('$R/state-run/warehouse/gold.db/daily_revenue_kpi')" \
			-clients "$n" -duration "${BI_SECS}s" -server-pid "$srvpid" -freshness -each "${BI_EACH}s" "${bi_windows_flag[@]}"
		[[ -n "${bi:-}" ]] || bi=$(cat "$R/logs/bilat-$proto-$n.out")
		bi_matrix+=("$(jq -r '
			def r: . * 10 | round / 10;
			def single: [.per_question.daily_kpis_30d, .per_question.by_country_day, .per_question.detail_newest_day] | map(.p99_ms) | max;
			def singlecpu: [.hot_each.daily_kpis_30d, .hot_each.by_country_day, .hot_each.detail_newest_day] | map(.server_cpu_ms_per_query) | max;
			"| \(.clients) | \(.protocol) | \(.hot.p50_ms | r) / \(.hot.p99_ms | r) | \(.hot | single | r) | \(.hot.qps | r) | \(.hot.server_cpu_ms_per_query | r) | \(singlecpu | r) | \(.cold.p50_ms | r) / \(.cold.p99_ms | r) | \(.cold.qps | r) | \(.cold.server_cpu_ms_per_query | r) | \(.hot.qps / .cold.qps | r)× | \(.freshness.p50_ms | r) / \(.freshness.p99_ms | r) |"' <"$R/logs/bilat-$proto-$n.out")")
	done
done
bi_q=$(jq -r '.checked_rows | length' <<<"$bi")
bi_rows=$(jq -r '[.checked_rows | to_entries[] | "\(.key) \(.value)"] | join(", ")' <<<"$bi")
bi_side() { jq -r --arg s "$1" '.[$s] | "p50 \(.p50_ms * 10 | round / 10) ms, p99 \(.p99_ms * 10 | round / 10) ms, \(.qps * 10 | round / 10) queries/s (\(.queries) in \(.seconds * 10 | round / 10) s), server CPU \(.server_cpu_ms_per_query * 10 | round / 10) ms/query"' <<<"$bi"; }
bi_hot=$(bi_side hot)
bi_cold=$(bi_side cold)
bi_ratio=$(jq -r '"cold ÷ hot: p50 \(.cold.p50_ms / .hot.p50_ms * 10 | round / 10)×, p99 \(.cold.p99_ms / .hot.p99_ms * 10 | round / 10)×; hot answers \(.hot.qps / .cold.qps * 10 | round / 10)× the queries/s at \(if .hot.server_cpu_ms_per_query > 0 then (.cold.server_cpu_ms_per_query / .hot.server_cpu_ms_per_query * 10 | round / 10) else "-" end)× less server CPU per query"' <<<"$bi")
bi_per=$(jq -r '[.hot.per_question | keys[] as $k | "\($k) \(.[$k].p50_ms * 10 | round / 10)"] | join(", ")' <<<"$bi")
bi_per_cold=$(jq -r '[.cold.per_question | keys[] as $k | "\($k) \(.[$k].p50_ms * 10 | round / 10)"] | join(", ")' <<<"$bi")

# ---------------------------------------------------------------- sanity
fail=0
check_same() { # label keys...
	local want=${sanity[$2]} k
	for k in "${@:3}"; do
		if [[ "${sanity[$k]}" != "$want" ]]; then
			echo "bench: MISMATCH ($1): $k=${sanity[$k]} vs $2=$want" >&2
			fail=1
		fi
	done
}
check_same "full build" duckdb_base clickhouse_base goldbridge_stages goldbridge_run
check_same "after +0.1%" duckdb_full clickhouse_full goldbridge_incremental

# ---------------------------------------------------------------- table
fmt_rate() { awk -v r="$1" -v s="$2" 'BEGIN {if (r ~ /^[0-9]+$/ && s > 0) printf "%.0f", r / s; else printf "-"}'; }
fmt_mb() { awk -v k="$1" 'BEGIN {if (k ~ /^[0-9]+$/) printf "%.0f MB", k / 1024; else printf "-"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f×", a / b; else printf "-"}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1f%%", 100 * a / b; else printf "-"}'; }
verdict() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/) {print "-"; exit}; ok = (op == "le") ? a <= b : a >= b; print (ok ? "met" : "not met")}'; }
thousands() { awk -v n="$1" 'BEGIN {if (n !~ /^[0-9]+$/) {printf "%s", n; exit}; s = ""; while (length(n) > 3) {s = "," substr(n, length(n) - 2) s; n = substr(n, 1, length(n) - 3)}; printf "%s%s", n, s}'; }

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
day=$(date -u +%Y-%m-%d)
commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
gbver=$("$BIN" version | sed -n 1p)
load=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
memgb=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
chver=$(chq "SELECT version()")

table=$(
	echo "### $stamp — $(thousands "$N") events (+$(thousands "$TAIL") incremental), seed $SEED, end $END"
	echo
	echo "$(nproc) cores ($cpu), ${memgb} GB RAM, load average at the end $load; binary: $gbver (repository at $commit);"
	echo "DuckDB $DUCK_VERSION (node $(node --version)), ClickHouse $chver. Input $input_mb MB JSONL in $FILES file(s); generated in ${gen_secs}s."
	if [[ "${BENCH_PROFILE:-}" == 1 ]]; then echo "The full \`run\` ran with --cpuprofile/--memprofile (BENCH_PROFILE=1)."; fi
	if [[ -n "${BENCH_CODEC:-}" ]]; then echo "Codecs of Bronze, Silver and Gold (BENCH_CODEC): $BENCH_CODEC."; fi
	echo
	echo "| stage | rows | seconds | rows/s | peak RSS | × DuckDB | × ClickHouse |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for r in "${rows[@]}"; do
		IFS='|' read -r name nrows secs rss peer <<<"$r"
		case $peer in
		base | full) rd=$(ratio "$secs" "${peer_secs[duckdb_$peer]}") rc=$(ratio "$secs" "${peer_secs[clickhouse_$peer]}") ;;
		*) rd="" rc="" ;;
		esac
		echo "| $name | $(thousands "$nrows") | $secs | $(thousands "$(fmt_rate "$nrows" "$secs")") | $(fmt_mb "$rss") | $rd | $rc |"
	done
	echo
	echo "Ratios are goldbridge's seconds ÷ the peer's seconds on the same input (below 1 = goldbridge faster);"
	echo "the incremental run is compared with the peers' full recompute of base + 0.1%. Peak RSS: the process"
	echo "(/usr/bin/time -v); for ClickHouse the server's high-water mark during the queries (reset before them)."
	echo "Stages inside the full \`run\`: $run_split; inside the incremental run: $incr_split."
	echo "ingest + silver + gold + sync as separate processes: ${stage_sum}s."
	echo
	echo "Acceptance (issue 21's goals, with issue 8's that still hold; the targets are for 10M events; the scale goals 1, 2 and 5's 30M are BENCH_SCALE=1's):"
	echo
	echo "| goal | target | measured | |"
	echo "|---|---|---|---|"
	echo "| 3 | full \`run\` ≤ 1.0× DuckDB in-memory SQL | $(ratio "$run_secs" "${peer_secs[duckdb_base]}") | $(verdict "$run_secs" le "${peer_secs[duckdb_base]}") |"
	echo "| 3 | full \`run\` ≤ 2.0× ClickHouse SQL | $(ratio "$run_secs" "${peer_secs[clickhouse_base]}") | $(verdict "$run_secs" le "$(awk -v a="${peer_secs[clickhouse_base]}" 'BEGIN {print 2 * a}')") |"
	echo "| 3 | Silver ≥ 1M rows/s (the \`silver\` stage alone) | $(thousands "$(fmt_rate "$silver_rows" "$silver_secs")") rows/s | $(verdict "$(fmt_rate "$silver_rows" "$silver_secs")" ge 1000000) |"
	echo "| 4 | push ≥ 95% of ClickHouse's bulk insert of the same rows (medians of 3 interleaved rounds) | ${push_med} s vs ${ceil_med} s = $(pct "$ceil_med" "$push_med"); the push's steps, medians in s: ${step_meds} | $(verdict "$ceil_med" ge "$(awk -v a="$push_med" 'BEGIN {print 0.95 * a}')") |"
	echo "| 4 | incremental ≥ 10× faster than ClickHouse SQL's recompute | $(ratio "${peer_secs[clickhouse_full]}" "$incr_secs") (DuckDB's: $(ratio "${peer_secs[duckdb_full]}" "$incr_secs")) | $(verdict "${peer_secs[clickhouse_full]}" ge "$(awk -v a="$incr_secs" 'BEGIN {print 10 * a}')") |"
	echo "| 5 | peak RSS of Silver's full build ≤ 2 GB (at 30M: BENCH_SCALE=1) | $(fmt_mb "$silver_rss") (the full \`run\`: $(fmt_mb "$run_rss")) | $(verdict "$silver_rss" le 2097152) |"
	echo "| 6 | BI latency, ${BI_CLIENTS%% *} clients (native) × ${BI_SECS} s per side, the $bi_q dashboard questions of docs/bi.md: hot (\`<mart>_final\`, its states or windows: $BI_WINDOWS) vs cold (Gold Iceberg via \`icebergLocal\`) | hot $bi_hot; cold $bi_cold; $bi_ratio | measured |"
	echo "| (8) | incremental ≤ 5% of goldbridge's full build | $(pct "$incr_secs" "$run_secs") | $(verdict "$incr_secs" le "$(awk -v a="$run_secs" 'BEGIN {print 0.05 * a}')") |"
	echo "| (8) | the first push ≥ 80% of the ceiling | the sync stage (plan, push, record: ${sync_stage_secs} s) at $(pct "$ceil_secs" "$sync_stage_secs") of the ceiling's speed ($(thousands "$(fmt_rate "$sync_rows" "$sync_stage_secs")") vs $(thousands "$(fmt_rate "$ceil_rows" "$ceil_secs")") rows/s); the whole \`sync\` process (with its start, catalog and lock) at $(pct "$ceil_secs" "$sync_secs"); rounds of \`sync --force\` ${push_rounds[*]} s, of the ceiling ${ceil_rounds[*]} s | $(verdict "$ceil_secs" ge "$(awk -v a="$sync_stage_secs" 'BEGIN {print 0.8 * a}')") |"
	echo
	echo "Sanity (Gold rows; total level: revenue in cents, orders, distinct customers; all levels: distinct customers, Σ avg in 1e-8):"
	echo
	echo '```'
	for k in duckdb_base clickhouse_base goldbridge_stages goldbridge_run duckdb_full clickhouse_full goldbridge_incremental; do
		printf '%-23s %s\n' "$k" "$(jq -r '[.gold_rows, .revenue_cents, .orders, .customers_total, .customers_all_levels, .avg_units_sum] | join("  ")' <<<"${sanity[$k]}")"
	done
	if ((fail)); then echo "MISMATCH"; else echo "all equal; goldbridge check: no drift"; fi
	echo "BI: hot and cold gave the same answer to each question (rows: $bi_rows)"
	echo '```'
	echo
	echo "BI p50 per question, ms: hot $bi_per; cold $bi_per_cold."
	echo
	echo "BI by concurrency and interface (the mart served with partition_by: $BI_PARTITION, distinct: $BI_DISTINCT, windows: $BI_WINDOWS (the questions over 7 and 30 days read \`<mart>_windows\` when 1): $bi_sync; ${BI_SECS} s per side in 4 alternating rounds; the hot side as the reader bi; latencies in ms, p50 / p99; single-grain: the worst p99 of the three view questions; CPU: the server's ms per query; single-grain CPU: the most of the three view questions, each asked alone by as many clients for ${BI_EACH} s):"
	echo
	echo "| clients | interface | hot p50 / p99 | hot single-grain p99 | hot q/s | hot CPU | hot single-grain CPU | cold p50 / p99 | cold q/s | cold CPU | hot ÷ cold q/s | freshness p50 / p99 |"
	echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	printf '%s\n' "${bi_matrix[@]}"
)

mkdir -p "$RESULTS"
out="$RESULTS/$day.md"
# shellcheck disable=SC2016 # the backquotes are Markdown
[[ -s "$out" ]] || printf '# Benchmark results %s\n\nWritten by `make bench` (bench/run.sh); newest last.\n' "$day" >"$out"
printf '\n%s\n' "$table" >>"$out"
echo
echo "$table"
echo
echo "appended to ${out#"$root"/}; logs in ${R#"$root"/}/logs"
if [[ "${BENCH_PROFILE:-}" == 1 ]]; then
	echo
	echo "CPU profile of the full run (go tool pprof -top -cum; also in logs/run.cpu.pprof, run.mem.pprof):"
	go tool pprof -top -cum -nodecount=40 "$BIN" "$R/logs/run.cpu.pprof" 2>/dev/null | sed -n 1,48p || true
fi
((fail == 0)) || die "the engines disagree on the result (see MISMATCH above)"
