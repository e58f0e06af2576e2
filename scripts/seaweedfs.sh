#!/usr/bin/env bash
# SeaweedFS (`weed mini`: S3 + the Iceberg REST catalog in one process) for the integration
# tests of the s3:// warehouse and the REST catalog.
#
#   seaweedfs.sh install     builds weed from the Go module proxy once and prints its path:
#                            ${GOLDBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goldbridge}/seaweedfs/<version>/weed
#   seaweedfs.sh installed   exits 0 when that binary is there
#   seaweedfs.sh background  starts `install` in the background (nice 10) unless the binary is
#                            there or a build is in progress, and returns at once; its output
#                            goes to build.log beside the binary (ending with rc=N)
#   seaweedfs.sh wait        waits for a build in progress (build.pid beside the binary), at most
#                            GB_WEED_WAIT seconds (default 1800), and exits 0 once the binary is
#                            there; fails naming the log if the build failed or took too long
#   seaweedfs.sh start DIR   starts it on loopback with DIR as its home; reads the ports and the
#                            credentials from the environment (below), waits until S3 and the
#                            catalog answer, writes DIR/pid
#   seaweedfs.sh stop DIR    SIGTERM to DIR/pid, waits until it is gone
#
# start needs GB_S3_PORT, GB_ICEBERG_PORT and GB_WEED_PORTS (six more free loopback ports:
# master, master gRPC, volume, volume gRPC, filer, filer gRPC, S3 gRPC, admin, admin gRPC:
# nine numbers separated by spaces), GB_S3_ACCESS_KEY and GB_S3_SECRET_KEY (the admin
# identity; there is no anonymous access), and optionally GB_S3_BUCKET (default warehouse)
# and GB_TABLE_BUCKET (default lakehouse, the REST catalog's warehouse).
#
# The build takes about 17 minutes cold on a loaded 2-core machine (the binary is cached by
# version, like libchdb); `go install module@version` is refused because seaweedfs's go.mod
# has replace directives, so it is built inside the downloaded module. One build runs at a
# time per version (flock on build.lock): a second install waits for it and finds the binary.
# `make test` runs `background` first, so the build overlaps the other tests, and the tests
# that need weed wait for it (lakehousetest.StartSeaweedFS runs `wait`).
set -euo pipefail
umask 077

version="v0.0.0-20261109003541-7506e5f91cd6" # SeaweedFS 4.53
module="github.com/seaweedfs/seaweedfs"

die() {
	echo "seaweedfs.sh: $*" >&2
	exit 1
}

cache="${GOLDBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goldbridge}"
bin="$cache/seaweedfs/$version/weed"
home="$(dirname "$bin")"
pidfile="$home/build.pid" # the pid of the build in progress
log="$home/build.log"     # the output of the last background build

install() {
	if [[ -x "$bin" ]]; then
		echo "$bin"
		return
	fi
	command -v go >/dev/null 2>&1 || die "go is required to build $module@$version"
	mkdir -p "$home"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$home/build.lock"
		flock 9
		if [[ -x "$bin" ]]; then # built by the holder we waited for
			echo "$bin"
			return
		fi
	fi
	echo $$ >"$pidfile"
	echo "seaweedfs.sh: building $module@$version (about 17 minutes the first time) ..." >&2
	local dir
	dir="$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
	[[ -d "$dir" ]] || die "go mod download $module@$version gave no directory"
	# Built next to the destination so the rename is atomic: a reader sees no file or all of it.
	local tmp
	tmp="$(mktemp "$(dirname "$bin")/.weed.XXXXXX")"
	trap 'rm -f "$tmp" "$pidfile"' EXIT
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$tmp" ./weed) ||
		die "go build $module@$version failed"
	chmod 0755 "$tmp"
	mv -f "$tmp" "$bin"
	rm -f "$pidfile"
	trap - EXIT
	echo "$bin"
}

# building: a build is in progress (its pid file names a live process).
building() {
	local pid
	pid="$(cat "$pidfile" 2>/dev/null)" || return 1
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

background() {
	if [[ -x "$bin" ]] || building; then
		return 0
	fi
	mkdir -p "$home"
	# The pid file is written here, before the child starts, so that a `wait` right after
	# this returns sees the build; install rewrites it with its own pid.
	nohup nice -n 10 bash -c '"$0" install; echo "rc=$?"' "$0" >"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
	echo "seaweedfs.sh: building $module@$version in the background (log: $log)" >&2
}

wait_build() {
	local limit="${GB_WEED_WAIT:-1800}" waited=0
	while [[ ! -x "$bin" ]] && building; do
		((waited < limit)) || die "the SeaweedFS build in progress (pid $(cat "$pidfile")) did not finish within ${limit}s; see $log"
		sleep 1
		((waited += 1))
	done
	[[ -x "$bin" ]] && return 0
	if [[ -f "$log" ]] && ! grep -q '^rc=0$' "$log"; then
		die "$bin is missing: the last background build failed ($(tail -n 1 "$log")); see $log, or run \`$0 install\`"
	fi
	die "$bin is missing and no build is in progress: run \`$0 install\` (make seaweedfs)"
}

need() {
	[[ -n "${!1:-}" ]] || die "$1 is not set"
}

start() {
	local dir="$1"
	need GB_S3_PORT
	need GB_ICEBERG_PORT
	need GB_WEED_PORTS
	need GB_S3_ACCESS_KEY
	need GB_S3_SECRET_KEY
	local ports
	read -r -a ports <<<"$GB_WEED_PORTS"
	((${#ports[@]} == 9)) || die "GB_WEED_PORTS needs 9 ports, has ${#ports[@]}"
	[[ -x "$bin" ]] || install >/dev/null
	command -v curl >/dev/null 2>&1 || die "curl is required to wait for weed (Debian: apt-get install curl)"
	mkdir -p "$dir/data" "$dir/logs"
	chmod 0700 "$dir"
	# The keys reach weed through its environment only (they become the admin identity);
	# they are never on its command line, so ps does not show them.
	GOMEMLIMIT=256MiB AWS_ACCESS_KEY_ID="$GB_S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$GB_S3_SECRET_KEY" \
		nohup "$bin" -logdir="$dir/logs" mini -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-s3.port="$GB_S3_PORT" -s3.port.iceberg="$GB_ICEBERG_PORT" -s3.port.lance=0 \
		-master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -master.telemetry=false \
		-volume.port="${ports[2]}" -volume.port.grpc="${ports[3]}" \
		-filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" -s3.port.grpc="${ports[6]}" \
		-admin.ui=false -admin.port="${ports[7]}" -admin.port.grpc="${ports[8]}" -admin.port.legacy=0 \
		-webdav=false -s3.autoCreateBucket=false \
		-bucket="${GB_S3_BUCKET:-warehouse}" -tableBucket="${GB_TABLE_BUCKET:-lakehouse}" \
		>"$dir/stdout" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	local pid
	pid="$(cat "$dir/pid")"
	# Ready when S3 refuses an anonymous request (403, not "connection refused") and the
	# catalog answers its config endpoint. Each probe is bounded: a port taken by another
	# listener accepts and may never answer.
	local i code cfg
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || die "weed exited during start; see $dir/stdout"
		code="$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GB_S3_PORT/" || true)"
		cfg="$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GB_ICEBERG_PORT/v1/config" || true)"
		if [[ "$code" == 403 && "$cfg" != 000 ]]; then
			return
		fi
		sleep 0.1
	done
	die "weed not ready after 60 s; see $dir/stdout"
}

stop() {
	local dir="$1" pid
	[[ -f "$dir/pid" ]] || return 0
	pid="$(cat "$dir/pid")"
	kill -TERM "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$dir/pid"
}

case "${1:-}" in
install) install ;;
installed) [[ -x "$bin" ]] || die "$bin is missing: run \`$0 install\` (make seaweedfs)" ;;
background) background ;;
wait) wait_build ;;
start) [[ -n "${2:-}" ]] || die "usage: $0 start DIR"; start "$2" ;;
stop) [[ -n "${2:-}" ]] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 install | installed | background | wait | start DIR | stop DIR" ;;
esac
