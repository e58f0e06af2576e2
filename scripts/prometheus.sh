#!/usr/bin/env bash
# Installs Debian's prometheus package (prometheus + promtool) for the real-Prometheus
# integration test of `goldbridge serve` and prints the path of promtool.
#
# Idempotent: does nothing when promtool and prometheus are already on PATH; otherwise
# runs `apt-get update` once and `apt-get install -y prometheus`. Needs root (or sudo).
set -euo pipefail

die() {
	echo "prometheus.sh: $*" >&2
	exit 1
}

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
	command -v promtool
	exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install Prometheus (>= 2.40) so that prometheus and promtool are on PATH"
sudo=""
if [[ "$(id -u)" != 0 ]]; then
	command -v sudo >/dev/null 2>&1 || die "run as root or install sudo"
	sudo="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update >&2
# --no-install-recommends: only the server and promtool, not the exporters; the package's
# service is not needed (tests start their own prometheus on loopback).
$sudo apt-get install -y --no-install-recommends prometheus >&2

command -v promtool >/dev/null 2>&1 || die "promtool not on PATH after installing the prometheus package"
command -v promtool
