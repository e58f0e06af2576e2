#!/usr/bin/env bash
# Prints the node_modules directory that holds @duckdb/node-api $DUCKDB_VERSION, installing
# it once under the cache (never into the repository): NODE_PATH=$(bench/duckdb.sh).
#   GOLDBRIDGE_CACHE   cache root (default ~/.cache/goldbridge)
set -euo pipefail
DUCKDB_VERSION=1.5.6-r.1
CACHE=${GOLDBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goldbridge}
duck="$CACHE/bench/duckdb-$DUCKDB_VERSION"
if [[ ! -d "$duck/node_modules/@duckdb/node-api" ]]; then
	echo "== installing @duckdb/node-api@$DUCKDB_VERSION into $duck (once)" >&2
	mkdir -p "$duck"
	[[ -f "$duck/package.json" ]] || echo '{"private": true}' >"$duck/package.json"
	(cd "$duck" && npm install --silent --no-audit --no-fund --cache "$duck/.npm" "@duckdb/node-api@$DUCKDB_VERSION" >/dev/null) || {
		echo "bench: npm install @duckdb/node-api@$DUCKDB_VERSION failed" >&2
		exit 1
	}
	rm -rf "$duck/.npm"
fi
echo "$duck/node_modules"
