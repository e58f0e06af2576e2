#!/usr/bin/env bash
# Rebuilds third_party/iceberg-go, the copy of iceberg-go that go.mod's `replace` points
# at, from the module cache: upstream $version without its tests, test data, docs site,
# CI files, CLI (cmd/) and Spark test recipe (internal/recipe), plus the patches in
# third_party/iceberg-go-patches/ applied in name order. See third_party/README.md.
#
#   scripts/iceberg-go-copy.sh && git diff --exit-code third_party   # the copy is what this makes
set -euo pipefail

version="v0.7.0" # keep in sync with go.mod's require of github.com/apache/iceberg-go
dst="third_party/iceberg-go"
patches="third_party/iceberg-go-patches"

cd "$(dirname "$0")/.."
src=$(GOFLAGS=-mod=mod go mod download -json "github.com/apache/iceberg-go@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "iceberg-go-copy.sh: no module dir for $version" >&2; exit 1; }

rm -rf "$dst"
cp -r "$src" "$dst"
chmod -R u+w "$dst"
find "$dst" -name '*_test.go' -delete
find "$dst" -type d -name testdata -prune -exec rm -rf {} +
rm -rf "$dst"/{website,dev,cmd,internal/recipe,.github} \
	"$dst"/{AGENTS.md,CONTRIBUTING.md,SECURITY-THREAT-MODEL.md,Makefile} \
	"$dst"/{.asf.yaml,.gitattributes,.gitignore,.golangci.yml,.pre-commit-config.yaml}
for p in "$patches"/*.patch; do
	patch -s -p1 -d "$dst" <"$p"
done
