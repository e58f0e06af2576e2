#!/usr/bin/env bash
# Installs libchdb.so, the whole ClickHouse 26.7 engine as a shared library, into
# the goldbridge cache and prints its path. npm is only the transport: the file
# comes from the npm package @chdb/lib-linux-x64-gnu; no Node.js code runs.
#
#   ${GOLDBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goldbridge}/chdb/<version>/libchdb.so
#
# Idempotent: does nothing if the file is already there. serving/chlocal loads it
# (or $GOLDBRIDGE_LIBCHDB if set).
set -euo pipefail

version="26.7.3-stable.1" # keep in sync with serving/chlocal.LibVersion
package="@chdb/lib-linux-x64-gnu"

die() {
	echo "clickhouse.sh: $*" >&2
	exit 1
}

cache="${GOLDBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/goldbridge}"
dir="$cache/chdb/$version"
dest="$dir/libchdb.so"

if [[ -s "$dest" ]]; then
	echo "$dest"
	exit 0
fi

[[ "$(uname -s)/$(uname -m)" == "Linux/x86_64" ]] ||
	die "$package is for Linux x86_64; this is $(uname -s)/$(uname -m). Set GOLDBRIDGE_LIBCHDB to a libchdb.so $version built for this platform."
command -v npm >/dev/null 2>&1 ||
	die "npm is required to download $package@$version (Debian: apt-get install npm), or set GOLDBRIDGE_LIBCHDB to an existing libchdb.so."
command -v tar >/dev/null 2>&1 || die "tar is required"

mkdir -p "$dir"
# The temporary directory sits next to the destination so the final rename is
# atomic (same filesystem): a reader sees either no file or the whole file.
tmp="$(mktemp -d "$dir/.download.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "clickhouse.sh: downloading $package@$version (about 180 MB) ..." >&2
# A private npm cache keeps the tarball out of ~/.npm (it would double the disk use).
(cd "$tmp" && npm pack --silent --cache "$tmp/npm-cache" "$package@$version" >/dev/null) ||
	die "npm pack $package@$version failed"

shopt -s nullglob
tgzs=("$tmp"/*.tgz)
((${#tgzs[@]} == 1)) || die "npm pack produced ${#tgzs[@]} tarballs in $tmp, expected 1"

tar -xzf "${tgzs[0]}" -C "$tmp" package/libchdb.so || die "package/libchdb.so not found in ${tgzs[0]}"
lib="$tmp/package/libchdb.so"
[[ "$(head -c 4 "$lib" | od -An -c | tr -d ' ')" == '177ELF' ]] || die "$lib is not an ELF shared library"
chmod 0755 "$lib"
mv -f "$lib" "$dest"

echo "$dest"
