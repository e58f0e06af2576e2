#!/usr/bin/env bash
# BENCH_PARQUET=N make bench (bench/run.sh hands over to this script): a Parquet-sourced
# pipeline (issue 41). examples/taxi.yaml over two overlapping landings of N generated TLC
# trips each (Parquet; the second repeats half of the first: 3N/2 distinct trips), side by
# side with DuckDB doing the same Silver and Gold and writing both to Parquet
# (bench/peers/duckdb_taxi.cjs), in BENCH_PARQUET_ROUNDS (default 3) alternating rounds:
#   goldbridge  `run` on a fresh state dir: ingest (Bronze), silver (rules F1-F3, N1-N4,
#               E0-E3, the keys table, the quarantine), gold taxi_daily, sync to the
#               embedded ClickHouse it starts; wall time and peak RSS (/usr/bin/time -v)
#   duckdb      @duckdb/node-api, in memory, Silver and Gold written as zstd Parquet
# Every round is checked: Gold's rows, trips, passengers, the sum of max_total and of
# Airport_fee (in cents) must be the same on both sides. A failing command or a mismatch
# exits 1; timings never do. Results (medians and each round) go to bench/results/<date>.md.
#
#   bench/parquet.sh [BIN]
set -euo pipefail
trap 'echo "bench parquet: failed at line $LINENO (exit $?)" >&2' ERR

cd "$(dirname "$0")/.."
root=$PWD
BIN=${1:-${BENCH_BIN:-bin/goldbridge}}
[[ "$BIN" == /* ]] || BIN="$root/$BIN"
N=${BENCH_PARQUET:-2000000}
ROUNDS=${BENCH_PARQUET_ROUNDS:-3}
CONFIG="$root/examples/taxi.yaml"
W=${BENCH_DIR:-$root/bench/data}
[[ "$W" == /* ]] || W="$root/$W"
W=$W/parquet
RESULTS=${BENCH_RESULTS:-$root/bench/results}
die() {
	echo "bench parquet: $*" >&2
	exit 1
}
log() { printf '== %s\n' "$*" >&2; }
[[ -x "$BIN" ]] || die "$BIN not found: run make build"
[[ "$N" =~ ^[0-9]+$ && "$N" -ge 1000 ]] || die "BENCH_PARQUET must be a number of trips per landing >= 1000"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian: apt-get install time)"
for c in node npm jq awk; do
	command -v "$c" >/dev/null || die "$c is required"
done
NODE_PATH=$("$root/bench/duckdb.sh") || die "DuckDB's npm package could not be installed"
export NODE_PATH

rm -rf "$W"
mkdir -p "$W/logs"
if [[ -n "${BENCH_CODEC:-}" ]]; then # as in bench/run.sh: "bronze silver gold" codecs
	read -r cb cs cg <<<"$BENCH_CODEC"
	[[ -n "$cg" ]] || die "BENCH_CODEC wants three codecs (bronze silver gold), got '$BENCH_CODEC'"
	sed "s|^  warehouse: \(.*\)\$|  warehouse: \1\n  compression: {bronze: \"$cb\", silver: \"$cs\", gold: \"$cg\"}|" "$CONFIG" >"$W/taxi.yaml"
	grep -q '^  compression:' "$W/taxi.yaml" || die "BENCH_CODEC: no lakehouse.warehouse line in $CONFIG"
	CONFIG="$W/taxi.yaml"
fi
gb() { "$BIN" -c "$CONFIG" --state-dir "$1" "${@:2}"; }

# measure NAME CMD...: CMD under /usr/bin/time -v, output in logs/NAME.*, after a sync
# and a pause; sets SECS (wall) and RSS_KB.
measure() {
	local name=$1 t0 t1
	shift
	sync
	sleep 2
	t0=$(date +%s%N)
	if ! /usr/bin/time -v -o "$W/logs/$name.time" "$@" >"$W/logs/$name.out" 2>"$W/logs/$name.err"; then
		echo "bench parquet: $name failed: $*" >&2
		tail -n 20 "$W/logs/$name.err" "$W/logs/$name.out" >&2
		exit 1
	fi
	t1=$(date +%s%N)
	SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
	RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/logs/$name.time")
}

log "generate: two landings of $N taxi trips (Parquet, overlapping by half)"
gen="$W/gen"
for landing in 1 2; do
	gb "$gen" demo generate --dataset taxi --format parquet --landing "$landing" --trips "$N" --seed 42 >/dev/null
done
# Older than sources.tlc_landing.settle: read at once, as files that landed a while ago.
find "$gen/landing" -type f -exec touch -d '-1 minute' {} +
landing_mb=$(du -sm "$gen/landing" | awk '{print $1}')

# sanity_gb STATE: Gold's figures as the DuckDB peer prints them (money in cents).
sanity_gb() {
	gb "$1" query "SELECT count(), sum(trips), sum(passengers), sum(toInt64(round(max_total * 100))), sum(toInt64(round(Airport_fee * 100))) FROM gold.taxi_daily FORMAT TSV" |
		awk -F'\t' '{printf "{\"gold_rows\":\"%s\",\"trips\":\"%s\",\"passengers\":\"%s\",\"max_total_cents\":\"%s\",\"fee_cents\":\"%s\"}\n", $1, $2, $3, $4, $5}' | jq -cS .
}

declare -a gb_secs gb_rss dk_secs dk_rss
for ((r = 1; r <= ROUNDS; r++)); do
	order=(goldbridge duckdb)
	((r % 2 == 1)) || order=(duckdb goldbridge)
	for side in "${order[@]}"; do
		case $side in
		goldbridge)
			st="$W/state-$r"
			mkdir -p "$st"
			cp -a "$gen/landing" "$gen/reference" "$st/"
			log "round $r: goldbridge run"
			measure "gb-$r" "$BIN" -c "$CONFIG" --state-dir "$st" run
			gb_secs+=("$SECS") gb_rss+=("$RSS_KB")
			got=$(sanity_gb "$st")
			rm -rf "$st"
			;;
		duckdb)
			out="$W/duckdb-$r"
			mkdir -p "$out"
			log "round $r: duckdb"
			measure "duckdb-$r" node "$root/bench/peers/duckdb_taxi.cjs" "$gen/landing/taxi/*.parquet" "$gen/reference/taxi_zone_lookup.csv" "$out"
			dk_secs+=("$SECS") dk_rss+=("$RSS_KB")
			want=$(jq -cS .sanity "$W/logs/duckdb-$r.out")
			rm -rf "$out"
			;;
		esac
	done
	[[ "$got" == "$want" ]] || die "round $r: goldbridge's Gold $got, DuckDB's $want"
	log "round $r: goldbridge ${gb_secs[-1]} s, duckdb ${dk_secs[-1]} s; both $got"
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
g=$(median "${gb_secs[@]}") d=$(median "${dk_secs[@]}")
ratio=$(awk -v a="$g" -v b="$d" 'BEGIN {printf "%.2f", a / b}')
stages=$(grep -hoE '^(ingest|silver|gold|sync) [a-z_]+: .*' "$W/logs/gb-1.out" | cut -c1-160 || true)
host="$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$RESULTS"
{
	echo
	echo "## Parquet pipeline ($(date -u +%H:%M) UTC): examples/taxi.yaml, 2 landings × $N trips ($((N * 3 / 2)) distinct), $landing_mb MB of Parquet"
	echo
	echo "$host; $ROUNDS alternating rounds, medians; every round's Gold equal on both sides: $got"
	if [[ -n "${BENCH_CODEC:-}" ]]; then echo; echo "Codecs of Bronze, Silver and Gold (BENCH_CODEC): $BENCH_CODEC."; fi
	echo
	echo "| side | wall s (each round) | median | peak RSS MB (median) |"
	echo "|---|---|---:|---:|"
	echo "| goldbridge \`run\` (Bronze, Silver, keys, quarantine, Gold to Iceberg; sync to ClickHouse) | ${gb_secs[*]} | $g | $(($(median "${gb_rss[@]}") / 1024)) |"
	echo "| DuckDB (Silver and Gold in memory, written as Parquet) | ${dk_secs[*]} | $d | $(($(median "${dk_rss[@]}") / 1024)) |"
	echo
	echo "goldbridge ÷ DuckDB: **${ratio}×** (issue 41's goal: ≤ 2.0×). goldbridge's first round, by stage:"
	echo
	echo '```'
	echo "$stages"
	echo '```'
} | tee -a "$RESULTS/$(date -u +%F).md"
rm -rf "$W/gen"
