# goldbridge — the two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin/goldbridge
STATE_DIR ?= ./var
DEMO_EVENTS ?= 200000
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
STATICCHECK_VERSION := v0.8.2

.PHONY: all build clickhouse prometheus seaweedfs seaweedfs-background postgres bench-deps demo test test-short lint fuzz bench bench-go clean

all: build

## build: the single static binary (CGO_ENABLED=0)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/goldbridge

## clickhouse: install the local ClickHouse 26.7 engine (libchdb from npm) into the user cache
clickhouse:
	@scripts/clickhouse.sh

## prometheus: install Debian's prometheus + promtool (for the operations integration test)
prometheus:
	@scripts/prometheus.sh >/dev/null

## seaweedfs: build SeaweedFS (S3 store + Iceberg REST catalog, for the object-store and
##            shared-catalog integration tests) into the user cache, once per version
##            (about 17 minutes cold on 2 cores; scripts/seaweedfs.sh)
seaweedfs:
	@scripts/seaweedfs.sh install >/dev/null

## seaweedfs-background: start that build in the background unless it is cached or running
seaweedfs-background:
	@scripts/seaweedfs.sh background

## postgres: install Debian's postgresql (the shared SQL catalog of the integration tests)
postgres:
	@scripts/postgres.sh install >/dev/null

## demo: the main job on the embedded stack (SQLite catalog + local warehouse + local ClickHouse);
##       DATASET=taxi runs examples/taxi.yaml instead (state in $(STATE_DIR)/taxi), DATASET=events
##       examples/events.yaml (state in $(STATE_DIR)/events)
DATASET ?= orders
demo: build clickhouse
	@if [ "$(DATASET)" = taxi ]; then scripts/demo-taxi.sh $(BIN) $(STATE_DIR)/taxi; \
	elif [ "$(DATASET)" = events ]; then scripts/demo-events.sh $(BIN) $(STATE_DIR)/events; \
	elif [ "$(DATASET)" = orders ]; then scripts/demo.sh $(BIN) $(STATE_DIR) $(DEMO_EVENTS); \
	else echo "DATASET: orders, taxi or events"; exit 2; fi

## test: everything, including integration tests against a real local ClickHouse, PostgreSQL,
##       SeaweedFS (S3 + Iceberg REST catalog) and iceberg-go. SeaweedFS's first build takes
##       about 17 minutes, so `test` starts it first, in the background (seaweedfs-background;
##       log: ~/.cache/goldbridge/seaweedfs/<version>/build.log), and the steps below overlap
##       it; a test that needs weed before the build is done waits for it (StartSeaweedFS runs
##       `scripts/seaweedfs.sh wait`, at most 5 minutes; on a machine's first run, if the build
##       is still going then, the S3 tests skip and say so). The build is cached, so later runs
##       start SeaweedFS at once; a build still running when the tests end goes on by itself.
test: seaweedfs-background clickhouse prometheus postgres lint
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...
	$(MAKE) --no-print-directory fuzz
	BENCH_QUICK=1 BENCH_RESULTS=bench/data/results $(MAKE) --no-print-directory bench

## fuzz: each fuzz target for FUZZ_TIME (seed corpora in testdata/fuzz; a crash is a failure).
##       The budget is a count of executions, not a duration: go1.26's fuzz coordinator can report
##       a spurious "context deadline exceeded" when a -fuzztime duration ends while a worker is
##       mid-call (golang/go#75804, fixed in go1.27); a count has no deadline to race.
FUZZ_TIME ?= 3000x
FUZZ_TARGETS := lakehouse/silver:FuzzParseDecimal lakehouse/silver:FuzzParseTimestamp \
	lakehouse/silver:FuzzParsePayload lakehouse/silver:FuzzFlatMatchesGeneral lakehouse/silver:FuzzRuleEval \
	lakehouse/silver:FuzzDebeziumEvent \
	lakehouse/bronze:FuzzReadCSV lakehouse/bronze:FuzzReadLines \
	lakehouse/jsonscan:FuzzSkipValue serving/lakesql:FuzzRewriteLakeSQL lakehouse/catalog:FuzzParseCodec
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZ_TIME) ./$${t%%:*}; \
	done

## test-short: unit tests only (no ClickHouse server)
test-short:
	$(GO) test -short -count=1 ./...

## lint: go vet + staticcheck + gofmt (third_party/ is upstream code: its own module, skipped by ./...),
##       and the vendored iceberg-go is exactly upstream's plus its patches (scripts/iceberg-go-copy.sh)
lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' ':!third_party')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@scripts/iceberg-go-copy.sh && git diff --exit-code --stat third_party || { echo "third_party/iceberg-go differs from upstream + third_party/iceberg-go-patches (see third_party/README.md)"; exit 1; }

## bench: the whole chain side by side with DuckDB and ClickHouse on the same input (bench/run.sh):
##        BENCH_EVENTS=N (default 10000000), BENCH_QUICK=1 (200k events, CI); appends to bench/results/<date>.md
bench: build clickhouse bench-deps
	bench/run.sh $(BIN)

## bench-go: the Go micro-benchmarks beside the code
bench-go: clickhouse
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

## bench-deps: what bench/run.sh needs besides Go and npm (Debian packages)
bench-deps:
	@for c in jq curl; do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	[ -x /usr/bin/time ] || missing="$$missing time"; \
	if [ -n "$$missing" ]; then apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing >/dev/null; fi

clean:
	rm -rf bin
