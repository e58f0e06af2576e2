#!/usr/bin/env bash
# PostgreSQL (Debian's package) as the shared Iceberg SQL catalog for the integration tests.
#
#   postgres.sh install     installs Debian's postgresql once (apt-get) and prints its bin dir
#   postgres.sh installed   exits 0 when the server binaries are there
#   postgres.sh start DIR   creates a cluster in DIR/data on first use (password auth only:
#                           scram-sha-256, no trust, no peer) and starts it on 127.0.0.1; writes
#                           nothing else outside DIR
#   postgres.sh stop DIR    fast shutdown of the cluster in DIR/data
#
# start reads GB_PG_PORT, GB_PG_PASSWORD (the password of the superuser "goldbridge"; it
# reaches initdb through a 0600 file that is removed afterwards, never a command line) and
# optionally GB_PG_DATABASE (default iceberg), which it creates. As root the server runs as
# the postgres user (it refuses root), so DIR must be traversable by that user.
set -euo pipefail
umask 077

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

bindir() {
	ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

install() {
	local b
	b="$(bindir)"
	if [[ -n "$b" && -x "$b/initdb" ]]; then
		echo "$b"
		return
	fi
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install PostgreSQL (>= 13) so that /usr/lib/postgresql/N/bin exists"
	local sudo=""
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "run as root or install sudo"
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update >&2
	# Only the server binaries are used; the package's own cluster and service are not.
	$sudo apt-get install -y --no-install-recommends postgresql >&2
	b="$(bindir)"
	[[ -n "$b" && -x "$b/initdb" ]] || die "initdb not found after installing postgresql"
	echo "$b"
}

# as runs a command as the server's owner: postgres when we are root, else ourselves.
as() {
	if [[ "$(id -u)" == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start() {
	local dir="$1" b
	[[ -n "${GB_PG_PORT:-}" ]] || die "GB_PG_PORT is not set"
	[[ -n "${GB_PG_PASSWORD:-}" ]] || die "GB_PG_PASSWORD is not set (nothing passwordless)"
	b="$(install)"
	local data="$dir/data" db="${GB_PG_DATABASE:-iceberg}"
	mkdir -p "$dir"
	if [[ ! -f "$data/PG_VERSION" ]]; then
		mkdir -p "$data"
		chmod 0700 "$data"
		[[ "$(id -u)" == 0 ]] && chown postgres:postgres "$data"
		local pw
		pw="$(mktemp "$dir/.pw.XXXXXX")"
		chmod 0600 "$pw"
		[[ "$(id -u)" == 0 ]] && chown postgres:postgres "$pw"
		printf '%s\n' "$GB_PG_PASSWORD" >"$pw"
		as "$b/initdb" -D "$data" -U goldbridge --pwfile="$pw" --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			{ rm -f "$pw"; die "initdb failed; see $dir/initdb.log"; }
		rm -f "$pw"
	fi
	as "$b/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -c port=$GB_PG_PORT \
-c unix_socket_directories=$data -c fsync=off -c max_connections=50" start >/dev/null ||
		die "pg_ctl start failed; see $data/server.log"
	# The database is created over TCP with the password (the same path every client takes).
	local exists
	exists="$(PGPASSWORD="$GB_PG_PASSWORD" "$b/psql" -h 127.0.0.1 -p "$GB_PG_PORT" -U goldbridge -d postgres -tAc \
		"select 1 from pg_database where datname = '$db'")" || die "psql failed"
	if [[ "$exists" != 1 ]]; then
		PGPASSWORD="$GB_PG_PASSWORD" "$b/createdb" -h 127.0.0.1 -p "$GB_PG_PORT" -U goldbridge "$db" || die "createdb $db failed"
	fi
}

stop() {
	local dir="$1" b
	[[ -f "$dir/data/postmaster.pid" ]] || return 0
	b="$(bindir)"
	as "$b/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
}

case "${1:-}" in
install) install ;;
installed) b="$(bindir)"; [[ -n "$b" && -x "$b/initdb" ]] || die "postgresql is missing: run \`$0 install\` (make postgres)" ;;
start) [[ -n "${2:-}" ]] || die "usage: $0 start DIR"; start "$2" ;;
stop) [[ -n "${2:-}" ]] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 install | installed | start DIR | stop DIR" ;;
esac
