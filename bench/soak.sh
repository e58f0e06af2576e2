#!/usr/bin/env bash
# BENCH_SOAK=N make bench (bench/run.sh hands over to this script): a cron life (issue 36).
# One landing file of BENCH_SOAK_EVENTS (default 2000) orders events, then `goldbridge
# run`, N times, in one state dir ("soaked"), with the embedded ClickHouse goldbridge
# starts and stops itself; beside it a state dir that got the same N files in one run
# ("one-shot"). Then, interleaved on both: BENCH_SOAK_REPEAT (default 3) no-change runs,
# and 3 runs with one more file each (the same files on both sides). Recorded: every
# run's wall time and peak RSS (a curve at ~20 points), and at the end, per table, the
# live data and delete files, manifests, snapshots, data and metadata files on disk and
# the current metadata file's size, and the embedded ClickHouse's part directories and
# bytes. Rows must match: every table's record count and the served mart's totals are
# compared between the two, and `check` must be clean on both.
#
#   bench/soak.sh [BIN]
#
# BENCH_SOAK_CONFIG=file uses another pipeline file (default examples/orders.yaml with
# the ClickHouse ports set; its maintenance: section is the one measured).
# BENCH_SOAK_RETAIN (default 1m) is maintenance.retain_age of the default config: the
# soak runs back to back, a few seconds apart, so it compresses a one-minute cron's
# hours into minutes; 1m keeps the 20-30 newest snapshots, about what the default 1h
# keeps at one run a minute (60).
# Results go to bench/results/<date>.md. Timings never fail the script; a failing
# command or a mismatch does.
set -euo pipefail
trap 'echo "bench soak: failed at line $LINENO (exit $?)" >&2' ERR

cd "$(dirname "$0")/.."
root=$PWD
BIN=${1:-${BENCH_BIN:-bin/goldbridge}}
[[ "$BIN" == /* ]] || BIN="$root/$BIN"
N=${BENCH_SOAK:-150}
EVENTS=${BENCH_SOAK_EVENTS:-2000}
REPEAT=${BENCH_SOAK_REPEAT:-3}
RETAIN=${BENCH_SOAK_RETAIN:-1m}
W=${BENCH_DIR:-$root/bench/data}
[[ "$W" == /* ]] || W="$root/$W"
W=$W/soak
RESULTS=${BENCH_RESULTS:-$root/bench/results}
[[ -x "$BIN" ]] || { echo "bench soak: $BIN not found: run make build" >&2; exit 1; }
[[ "$N" =~ ^[0-9]+$ && "$N" -ge 2 ]] || { echo "bench soak: BENCH_SOAK must be a number >= 2" >&2; exit 1; }

rm -rf "$W"
mkdir -p "$W"
[[ "${BENCH_KEEP:-}" == 1 ]] || trap 'rm -rf "$W"' EXIT
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "bench soak: no free port found" >&2
	exit 1
}
# config SIDE: the pipeline of one side, with its own embedded ClickHouse ports.
config() {
	local tcp http
	tcp=$(free_port)
	http=$(free_port)
	[[ "$tcp" != "$http" ]] || http=$(free_port)
	if [[ -n "${BENCH_SOAK_CONFIG:-}" ]]; then
		sed -e "s#tcp_port: .*#tcp_port: $tcp#" -e "s#http_port: .*#http_port: $http#" "$BENCH_SOAK_CONFIG" >"$W/$1.yaml"
	else
		sed -e "s#^  embedded: true.*#  embedded: true\n  local: {tcp_port: $tcp, http_port: $http}#" "$root/examples/orders.yaml" >"$W/$1.yaml"
		printf '\nmaintenance:\n  retain_age: %s\n' "$RETAIN" >>"$W/$1.yaml"
	fi
}
config soaked
config oneshot

# The input: N + 3 files of EVENTS events each, the newest day today (the hot window).
"$BIN" --state-dir "$W/gen" demo generate --events $(((N + 3) * EVENTS)) --files $((N + 3)) --seed 11 \
	--end "$(date -u +%F)" --days 60 --out "$W/files" >/dev/null
mapfile -t files < <(ls "$W/files"/orders-*.jsonl | sort)
[[ ${#files[@]} -eq $((N + 3)) ]] || { echo "bench soak: generated ${#files[@]} files, want $((N + 3))" >&2; exit 1; }

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# land SIDE FILE: copy one file into a side's landing, dated a minute back (past settle).
# A copy, not a hard link: touching a link dates the other side's file too, and a landing
# file whose mtime changed is checksummed at every later run (bronze.fileChanged), which
# the soaked side then paid for all its files in every measured run.
land() {
	mkdir -p "$W/$1/landing/orders"
	cp "$2" "$W/$1/landing/orders/"
	touch -d '-1 min' "$W/$1/landing/orders/$(basename "$2")"
}
# timed SIDE NAME ARGS...: one goldbridge command; sets MS and RSS (MB).
timed() {
	local side=$1 name=$2 t0
	shift 2
	mkdir -p "$W/$side.logs"
	t0=$(date +%s%N)
	if ! /usr/bin/time -v -o "$W/$side.logs/$name.rss" "$BIN" -c "$W/$side.yaml" --state-dir "$W/$side" "$@" >"$W/$side.logs/$name.out" 2>&1; then
		echo "bench soak: $side $name failed" >&2
		tail -n 20 "$W/$side.logs/$name.out" >&2
		exit 1
	fi
	MS=$(ms "$t0")
	RSS=$(awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$W/$side.logs/$name.rss")
}
stats() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {printf "%.3f s (%.3f–%.3f)", v[int((NR + 1) / 2)] / 1000, v[1] / 1000, v[NR] / 1000}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "== soak: $N one-file runs of $EVENTS events" >&2
curve=()
step=$(((N + 19) / 20))
for i in $(seq 1 "$N"); do
	land soaked "${files[$((i - 1))]}"
	timed soaked "run-$i" run
	if ((i == 1 || i % step == 0 || i == N)); then
		curve+=("| $i | $(printf '%.2f' "$(echo "$MS / 1000" | bc -l)") s | $RSS MB |")
		echo "   run $i: $MS ms, $RSS MB" >&2
	fi
done
echo "== one-shot: the same $N files in one run" >&2
for i in $(seq 1 "$N"); do land oneshot "${files[$((i - 1))]}"; done
timed oneshot full run
oneshot_full=$MS

echo "== interleaved: $REPEAT no-change runs, then 3 runs with one more file, on each side" >&2
declare -A nc inc rss
for r in $(seq "$REPEAT"); do
	for side in soaked oneshot; do
		timed "$side" "nochange-$r" run
		nc[$side]+="$MS "
	done
done
for j in 1 2 3; do
	for side in soaked oneshot; do
		land "$side" "${files[$((N + j - 1))]}"
		timed "$side" "incr-$j" run
		inc[$side]+="$MS "
		rss[$side]+="$RSS "
	done
done

# table_stats SIDE: one row per table: live data/delete files and snapshots (tables),
# data and metadata files on disk, current metadata bytes.
table_stats() {
	local side=$1 t dir meta
	"$BIN" -c "$W/$side.yaml" --state-dir "$W/$side" tables 2>/dev/null | awk 'NR > 1 {print $1, $4, $5, $6}' |
		while read -r t recs dels live; do
			dir="$W/$side/warehouse/${t%%.*}.db/${t#*.}"
			meta=$(ls -t "$dir"/metadata/*.metadata.json | head -n 1)
			printf '%s %s %s %s %s %s %s\n' "$t" "$recs" "$live" \
				"$(find "$dir/data" -type f -name '*.parquet' | wc -l)" \
				"$(find "$dir/metadata" -type f | wc -l)" "$(stat -c %s "$meta")" "$dels"
		done
}
ch_stats() { # part directories and MB of the embedded ClickHouse's data dir
	local d="$W/$1/clickhouse"
	printf '%s %s' "$(find "$d" -type d -regex '.*/[a-z0-9_]+_[0-9]+_[0-9]+_[0-9]+\(_[0-9]+\)?' | wc -l)" \
		"$(du -sm "$d" | cut -f1)"
}
soaked_tables=$(table_stats soaked)
oneshot_tables=$(table_stats oneshot)
# Rows: every table's rows must match (counted through a subquery: ClickHouse 26.7
# answers a bare count() from the snapshot summary, which counts rows deleted by
# equality deletes too), and the served totals.
rows_of() {
	local side=$1 t
	for t in $(awk '{print $1}' <<<"$soaked_tables"); do
		printf '%s %s\n' "$t" "$("$BIN" -c "$W/$side.yaml" --state-dir "$W/$side" query "SELECT count() FROM (SELECT * FROM $t)" 2>/dev/null)"
	done
}
soaked_rows=$(rows_of soaked)
oneshot_rows=$(rows_of oneshot)
[[ "$soaked_rows" == "$oneshot_rows" ]] ||
	{ echo "bench soak: rows differ:"; paste <(echo "$soaked_rows") <(echo "$oneshot_rows"); exit 1; } >&2
served() {
	"$BIN" -c "$W/$1.yaml" --state-dir "$W/$1" clickhouse query \
		"SELECT count(), sum(total_orders), sum(total_revenue), sum(unique_customers) FROM marts.daily_revenue_kpi_final" 2>/dev/null
}
[[ "$(served soaked)" == "$(served oneshot)" ]] || { echo "bench soak: served totals differ: $(served soaked) vs $(served oneshot)" >&2; exit 1; }
for side in soaked oneshot; do
	"$BIN" -c "$W/$side.yaml" --state-dir "$W/$side" check >"$W/$side.logs/check.out" 2>&1 ||
		{ echo "bench soak: check on $side failed" >&2; cat "$W/$side.logs/check.out" >&2; exit 1; }
done
read -r soaked_parts soaked_mb <<<"$(ch_stats soaked)"
read -r oneshot_parts oneshot_mb <<<"$(ch_stats oneshot)"

ratio() { echo "scale=2; $1 / $2" | bc -l; }
s_nc=$(median ${nc[soaked]}) o_nc=$(median ${nc[oneshot]})
s_inc=$(median ${inc[soaked]}) o_inc=$(median ${inc[oneshot]})
s_rss=$(median ${rss[soaked]}) o_rss=$(median ${rss[oneshot]})
mkdir -p "$RESULTS"
out="$RESULTS/$(date -u +%F).md"
{
	echo
	echo "## soak $(date -u +%H:%M) UTC: $N one-file runs of $EVENTS events (bench/soak.sh, commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo ?))"
	echo
	echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); one-shot full run of the same files: $(printf '%.2f' "$(echo "$oneshot_full / 1000" | bc -l)") s"
	echo
	echo "| measured interleaved at the end | soaked | one-shot | ratio |"
	echo "|---|---:|---:|---:|"
	echo "| \`run\` with nothing new (median of $REPEAT) | $(stats ${nc[soaked]}) | $(stats ${nc[oneshot]}) | $(ratio "$s_nc" "$o_nc")× |"
	echo "| \`run\` with one new file (median of 3) | $(stats ${inc[soaked]}) | $(stats ${inc[oneshot]}) | $(ratio "$s_inc" "$o_inc")× |"
	echo "| its peak RSS | $s_rss MB | $o_rss MB | $(ratio "$s_rss" "$o_rss")× |"
	echo "| embedded ClickHouse part directories | $soaked_parts | $oneshot_parts | $(ratio "$soaked_parts" "$oneshot_parts")× |"
	echo "| embedded ClickHouse data dir | $soaked_mb MB | $oneshot_mb MB | |"
	echo
	echo "| table | live data files soaked / one-shot | delete rows (summary) | data files on disk | metadata dir files | current metadata bytes |"
	echo "|---|---:|---:|---:|---:|---:|"
	join <(sort <<<"$soaked_tables") <(sort <<<"$oneshot_tables") | while read -r t _ l1 d1 m1 b1 x1 _ l2 d2 m2 b2 x2; do
		echo "| $t | $l1 / $l2 | $x1 / $x2 | $d1 / $d2 | $m1 / $m2 | $b1 / $b2 |"
	done
	echo
	echo "| soaked run | wall | peak RSS |"
	echo "|---:|---:|---:|"
	printf '%s\n' "${curve[@]}"
} | tee -a "$out"
