#!/usr/bin/env bash
# BENCH_SCALE=1 make bench (bench/run.sh hands over to this script): how goldbridge's
# incremental run and its no-change run grow with what is already stored (issue 21).
#
#   bench/scale.sh [BIN]
#
# For each size N of BENCH_SCALE_SIZES (default "1000000 3000000 10000000"; add 30000000
# on a machine with ~40 GB free and an hour), in a fresh state dir with the embedded
# ClickHouse that goldbridge starts itself (the cron case):
#   full       `run` over N demo events (seed 42, end 2026-06-30)
#   no-change  BENCH_SCALE_REPEAT (default 5) `run`s and `sync`s with nothing new,
#              interleaved; median and range
#   increment  `run` after landing the held-back BENCH_SCALE_TAIL (default 10000) events,
#              with its Silver and Gold stages from the metrics textfile
#   gold       on a copy of the lake made before the increment: the same increment's
#              `ingest` and `silver`, then its `gold` alone (in `run` the embedded
#              ClickHouse starts beside the Gold stage) and `gold --full` after it, pro-rated
#              to the Silver rows the increment recomputed: a rebuild of just the touched
#              partitions, which the increment's Gold should not exceed (issue 41)
# and the incremental run's ratio to the smallest size's: the goal is ≤ 1.15× at 30M.
# BENCH_SCALE_HISTORY says how the stored history grows with N: "days" (default) keeps
# the smallest size's events per day and lengthens the history (the smallest size spans
# 120 days, N events span 120 × N / smallest days): a lakehouse grows by time. "dense"
# keeps 120 days for every N, so each day (each Gold partition the tail touches, which
# Gold recomputes whole) holds N / smallest times the rows.
# BENCH_SCALE_HOT (e.g. 120d) sets the mart's ClickHouse hot window, counted back from
# the newest Gold day (hot_window_anchor: data); the default keeps bench/orders.yaml's
# ten years, so ClickHouse holds every day of the history.
# BENCH_SCALE_PROFILE=DIR keeps each incremental run's log (at --log-level debug), CPU
# profile and execution trace in DIR as incr-N.{log,pprof,trace}, to attribute its time.
# The rows are appended to bench/results/<date>.md. Timings never fail the script;
# a failing command does.
set -euo pipefail
trap 'echo "bench scale: failed at line $LINENO (exit $?)" >&2' ERR

cd "$(dirname "$0")/.."
root=$PWD
BIN=${1:-${BENCH_BIN:-bin/goldbridge}}
[[ "$BIN" == /* ]] || BIN="$root/$BIN"
SIZES=${BENCH_SCALE_SIZES:-1000000 3000000 10000000}
TAIL=${BENCH_SCALE_TAIL:-10000}
REPEAT=${BENCH_SCALE_REPEAT:-5}
HISTORY=${BENCH_SCALE_HISTORY:-days}
HOT=${BENCH_SCALE_HOT:-}
PROFILE=${BENCH_SCALE_PROFILE:-}
[[ -z "$PROFILE" || "$PROFILE" == /* ]] || PROFILE="$root/$PROFILE"
[[ -z "$HOT" || "$HOT" =~ ^[0-9]+d$ ]] || { echo "bench scale: BENCH_SCALE_HOT must be a number of days, e.g. 120d" >&2; exit 1; }
[[ "$HISTORY" == days || "$HISTORY" == dense ]] || { echo "bench scale: BENCH_SCALE_HISTORY must be days or dense" >&2; exit 1; }
W=${BENCH_DIR:-$root/bench/data}
[[ "$W" == /* ]] || W="$root/$W"
W=$W/scale
RESULTS=${BENCH_RESULTS:-$root/bench/results}
[[ -x "$BIN" ]] || { echo "bench scale: $BIN not found: run make build" >&2; exit 1; }

rm -rf "$W"
mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
# bench/orders.yaml with the embedded server goldbridge starts and stops itself.
hot_sed=()
[[ -z "$HOT" ]] || hot_sed=(-e "s#^\( *\)hot_window: 3650d#\1hot_window: $HOT\n\1hot_window_anchor: data#")
sed -e '/password_file:/d' -e 's#path: \${GB_BENCH_CH_PATH}#path: ${STATE_DIR}/clickhouse#' "${hot_sed[@]}" \
	-e 's#\${GB_BENCH_LANDING}#${STATE_DIR}/landing#' "$root/bench/orders.yaml" >"$W/orders.yaml"
export GB_BENCH_DB=marts GB_BENCH_CH_TCP GB_BENCH_CH_HTTP
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "bench scale: no free port found" >&2
	exit 1
}
GB_BENCH_CH_TCP=$(free_port)
GB_BENCH_CH_HTTP=$(free_port)
[[ "$GB_BENCH_CH_TCP" != "$GB_BENCH_CH_HTTP" ]] || GB_BENCH_CH_HTTP=$(free_port)

ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
# timed NAME ARGS...: one goldbridge command on the current state dir; sets MS.
timed() {
	local name=$1 t0
	shift
	t0=$(date +%s%N)
	if ! /usr/bin/time -v -o "$S.logs/$name.rss" "$BIN" -c "$W/orders.yaml" --state-dir "$S" "$@" >"$S.logs/$name.out" 2>&1; then
		echo "bench scale: $name failed" >&2
		tail -n 20 "$S.logs/$name.out" >&2
		exit 1
	fi
	MS=$(ms "$t0")
}
# timed_rss NAME ARGS...: timed, and sets RSS to the process's peak RSS in MB.
timed_rss() {
	local name=$1
	shift
	timed "$name" "$@"
	RSS=$(awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$S.logs/$name.rss")
}
stats() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {printf "%.3f s (%.3f–%.3f)", v[int((NR + 1) / 2)] / 1000, v[1] / 1000, v[NR] / 1000}'; }
gold_secs() {
	awk '/^goldbridge_stage_duration_seconds_sum\{.*stage="gold"/ {s += $NF} END {printf "%.2f", s}' "$S/metrics.prom"
}
# gold_line FILE: the partitions, Silver rows and seconds of the (last) mart line of a
# gold stage's output ("gold MART: [full rebuild, ]N partitions, R silver rows -> ..., S.SSs, ...").
gold_line() {
	awk '/^gold / {p = 0; for (i = 1; i < NF; i++) {if ($(i + 1) ~ /^partitions/) p = $i; if ($(i + 1) == "silver") r = $i; if ($i ~ /^[0-9.]+s,$/) s = $i + 0}} END {print p + 0, r + 0, s + 0}' "$1"
}
silver_secs() {
	awk '/^goldbridge_stage_duration_seconds_sum\{.*stage="silver"/ {s += $NF} END {printf "%.2f", s}' "$S/metrics.prom"
}

rows=() first="" smallest=$(printf '%s\n' $SIZES | sort -n | head -n 1)
for N in $SIZES; do
	days=120
	[[ "$HISTORY" == dense ]] || days=$((120 * N / smallest))
	S=$W/state-$N
	mkdir -p "$S.logs" "$S/landing" "$W/gen-$N"
	echo "== scale $N: generate $((N + TAIL)) events" >&2
	"$BIN" --state-dir "$S" demo generate --events $((N + TAIL)) --seed 42 --end 2026-06-30 --days "$days" \
		--files $(((N + 249999) / 250000)) --out "$W/gen-$N" >/dev/null
	gen=("$W/gen-$N"/orders-*.jsonl)
	last=${gen[-1]}
	lines=$(wc -l <"$last")
	head -n $((lines - TAIL)) "$last" >"$last.base"
	tail -n "$TAIL" "$last" >"$W/gen-$N/tail"
	mv "$last.base" "$last"
	mv "$W/gen-$N"/orders-*.jsonl "$S/landing/"
	echo "== scale $N: full run" >&2
	sync
	timed_rss full run
	full=$MS full_rss=$RSS
	echo "== scale $N: $REPEAT no-change runs and syncs, interleaved" >&2
	nrun=() nsync=()
	for i in $(seq "$REPEAT"); do
		timed "nochange-run-$i" run
		nrun+=("$MS")
		timed "nochange-sync-$i" sync
		nsync+=("$MS")
	done
	echo "== scale $N: incremental run (+$TAIL events)" >&2
	# A copy of the lake for the Gold comparison below, before the tail lands.
	rm -rf "$S.gold" && cp -a "$S" "$S.gold" && mkdir -p "$S.gold.logs"
	cp "$W/gen-$N/tail" "$S.gold/landing/orders-99999.jsonl"
	mv "$W/gen-$N/tail" "$S/landing/orders-99999.jsonl"
	sync
	prof=()
	[[ -z "$PROFILE" ]] || { mkdir -p "$PROFILE" && prof=(--log-level debug --cpuprofile "$PROFILE/incr-$N.pprof" --trace "$PROFILE/incr-$N.trace"); }
	timed_rss incr "${prof[@]}" run
	incr=$MS incr_rss=$RSS
	[[ -z "$PROFILE" ]] || cp "$S.logs/incr.out" "$PROFILE/incr-$N.log"
	silver=$(silver_secs) gold=$(gold_secs)
	first=${first:-$incr}
	# Gold alone (issue 41): on the copy, the same increment's ingest and silver, then its
	# gold as a command of its own (inside `run` the embedded ClickHouse starts beside
	# it), then `gold --full` (every partition) pro-rated by Silver rows: the cost of a
	# rebuild of just the touched partitions, which the increment should not exceed.
	# Both times are the mart's, from its line of output (gold_line).
	S0=$S S=$S.gold
	timed goldinc-ingest ingest
	timed goldinc-silver silver
	timed goldinc gold
	timed goldfull gold --full
	read -r touched trows tsecs < <(gold_line "$S.logs/goldinc.out")
	read -r _ frows fsecs < <(gold_line "$S.logs/goldfull.out")
	S=$S0
	prorated=$(awk -v g="$fsecs" -v t="$trows" -v f="$frows" 'BEGIN {printf "%.3f", (f > 0 ? g * t / f : 0)}')
	rows+=("| $N | $days | $(awk -v a="$full" 'BEGIN {printf "%.1f", a / 1000}') | $full_rss | $(awk -v a="$incr" 'BEGIN {printf "%.2f", a / 1000}') | $incr_rss | $silver | $gold | $touched ($trows rows, $tsecs s) | $fsecs ($frows rows) | $prorated | $(awk -v a="$tsecs" -v b="$prorated" 'BEGIN {printf "%.2f×", (b > 0 ? a / b : 0)}') | $(awk -v a="$incr" -v b="$first" 'BEGIN {printf "%.2f×", a / b}') | $(stats "${nrun[@]}") | $(stats "${nsync[@]}") |")
	rm -rf "$S" "$S.gold" "$S.gold.logs" "$W/gen-$N" # the next size needs the disk
done

table=$(
	echo "### $(date -u '+%Y-%m-%d %H:%M UTC') — scale curve (BENCH_SCALE=1, history: $HISTORY${HOT:+, hot window $HOT}): +$TAIL events on each stored size"
	echo
	echo "$(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg); binary: $("$BIN" version | sed -n 1p) (repository at $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown))."
	echo
	echo "| stored events | days | full \`run\` s | its peak RSS MB | incremental \`run\` s | its peak RSS MB | its Silver stage s | its Gold stage s | the increment's \`gold\` alone: partitions (Silver rows, s) | \`gold --full\` after it s (Silver rows) | that pro-rated to the increment's rows, s | \`gold\` ÷ pro-rated | × the smallest size's incremental | no-change \`run\` (median, range of $REPEAT) | no-change \`sync\` |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	echo "Goals (issue 21): incremental at 30M ≤ 1.15× the 1M one; no-change \`run\` ≤ 0.3 s, \`sync\` ≤ 0.5 s; the full build at 30M within 2 GB (the full \`run\`'s peak RSS bounds its Silver stage's)."
)
mkdir -p "$RESULTS"
out="$RESULTS/$(date -u +%Y-%m-%d).md"
# shellcheck disable=SC2016 # the backquotes are Markdown
[[ -s "$out" ]] || printf '# Benchmark results %s\n\nWritten by `make bench` (bench/run.sh); newest last.\n' "$(date -u +%Y-%m-%d)" >"$out"
printf '\n%s\n' "$table" >>"$out"
echo
echo "$table"
echo
echo "appended to ${out#"$root"/}"
