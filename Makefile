# Flightline. `make demo` runs the embedded pipeline; `make test` starts the
# real services the tests need (installing them on first use), runs every
# test with the race detector, and stops the services again.
SHELL := /bin/bash
GO ?= go
SERVICES := integration/services/services.sh
GOTESTFLAGS ?= -race -count=1 -timeout 60m

.PHONY: all build demo test test-unit test-interop services-up services-down bench bench-report fuzz chaos chaos-kill chaos-fuzz fuzz-long vet soak

# The fuzz targets of the wire boundary (package:Target). Their seed corpus
# (internal/doputtest) replays in every `go test`; `make fuzz` mutates each
# for FUZZTIME (part of `make test`), `make chaos` for CHAOSTIME.
FUZZ_TARGETS := ./internal/ipcguard:FuzzCheck ./flightsink:FuzzDoPutNull ./flightsink:FuzzDoPutMemory \
	./flightsink:FuzzDoPutDir ./flightsink/delta:FuzzDoPutDelta
FUZZTIME ?= 10s
CHAOSTIME ?= 15m

all: build

# cgo is required: the ADBC driver manager (adbc/) is C++ reached through
# cgo. Without it the binary builds but the adbc kinds refuse C drivers.
# The commit flightline version prints where Go stamps no VCS information.
FLIGHTLINE_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	CGO_ENABLED=1 $(GO) build -ldflags "-X main.commit=$(FLIGHTLINE_COMMIT)" -o bin/flightline ./cmd/flightline

demo: build
	./bin/flightline demo

# Unit tests only: no services, integration tests skip with a message.
test-unit:
	$(GO) test $(GOTESTFLAGS) ./...

# What needs the BigQuery emulator: these packages, and the tests named
# TestIntegrationBigQuery* of ./integration/. Its first build takes 10–30
# minutes, so `services.sh up` only starts it in the background; they run
# in a last phase, after every other test and the fuzz targets, once
# `services.sh wait bigquery` has the emulator up. The packages run one at
# a time, each on an emulator started afresh: the emulator is one SQLite
# database (the sink's tests do not retry a call another process's lock
# failed), and it slows as its state grows — the crash test's 500-row
# MERGEs went from about 2 s to 15 s after the packages' tests had run.
BQ_PKGS := ./flightsink/bigquery/... ./flightsrc/bigquery/...
BQ_INTEGRATION := ^TestIntegrationBigQuery

# The fault and kill tests append their summary rows here (JSON lines);
# make test and make chaos print one table of them at the end.
CHAOS_REPORT ?= $(CURDIR)/chaos-report.jsonl
CHAOS_SUMMARY = $(GO) run ./integration/chaossummary $(CHAOS_REPORT)

test:
	@$(SERVICES) up
	@set -a; . integration/services/run/env; set +a; \
	export FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_CHAOS_REPORT=$(CHAOS_REPORT); rm -f $(CHAOS_REPORT); \
	bq=$$($(GO) list $(BQ_PKGS)) && rest=$$($(GO) list ./... | grep -vxF "$$bq") && \
	$(GO) vet ./... && CGO_ENABLED=0 $(GO) build ./... && CGO_ENABLED=0 $(GO) test -count=1 ./adbc/ && \
	CGO_ENABLED=1 $(GO) test $(GOTESTFLAGS) -skip '$(BQ_INTEGRATION)' $$rest && \
	$(MAKE) --no-print-directory fuzz && \
	$(SERVICES) wait bigquery && (for p in $$bq integration; do \
		$(SERVICES) restart bigquery && set -a && . integration/services/run/env && set +a || exit 1; \
		if [ $$p = integration ]; then CGO_ENABLED=1 $(GO) test $(GOTESTFLAGS) -run '$(BQ_INTEGRATION)' ./integration/ || exit 1; \
		else CGO_ENABLED=1 $(GO) test $(GOTESTFLAGS) $$p || exit 1; fi; \
	done); rc=$$?; \
	$(CHAOS_SUMMARY); $(SERVICES) down; exit $$rc

# The whole Delta interop test with Apache Spark (pyspark + delta-spark in
# their own venv; `make test` runs its fast part: the demo's and a
# generator table): also a schema-evolved table, Spark's own DELETE,
# OPTIMIZE and VACUUM followed by a Flightline resume, and v2 checkpoints.
test-interop:
	@$(SERVICES) up python spark && set -a && . integration/services/run/env && set +a && \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_INTEROP=1 $(GO) test -race -count=1 -timeout 60m -v \
		-run '^TestInteropSpark$$' ./integration/ ; rc=$$?; $(SERVICES) down; exit $$rc

# Longer runs than `make test` has time for. Each recipe line stands alone
# (starts what it needs, stops it). The kill tests: 100 kill -9s of a random
# process of a three-process Kafka pipeline per exactly-once sink, Delta on
# S3 and Databricks (fake catalog, moto) included (FLIGHTLINE_KILL_SEED=N
# replays a run's kill schedule).
# The heavy matrices: 100 kills per exactly-once sink (Delta on S3 too),
# 50 with and 50 without the source's instance_id (FLIGHTLINE_CHAOS_KILLS
# sets the number per variant), PostgreSQL restarted 5 times
# each way under the PostgreSQL sink, S3 faults under Delta on S3 and
# Databricks, the Kafka broker and the Snowflake emulator killed and
# restarted, disk full under Dir and Delta (3 times each), network
# partitions of every link of the split pipeline (3, 14 and 40 s; Delta and
# PostgreSQL), tc netem delay and loss where the kernel has it, 12
# scale-out changes (three instances on three network-namespace hosts,
# killed, added, removed), then the DoPut fuzz targets for CHAOSTIME each;
# the summary table of every fault is printed after the kill tests and
# again at the end. The namespace and disk-full tests need root.
chaos: chaos-kill chaos-fuzz
	@$(CHAOS_SUMMARY)

chaos-kill:
	@$(SERVICES) up kafka postgres python s3 moto adbc fakesnow && set -a && . integration/services/run/env && set +a && \
	rm -f $(CHAOS_REPORT) && FLIGHTLINE_CHAOS_REPORT=$(CHAOS_REPORT) \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_CHAOS=1 $(GO) test -race -count=1 -timeout 120m -v \
		-run '^(TestIntegrationSplitKill9|TestIntegrationQuickSourceRestart|TestIntegrationPostgresRestart|TestIntegrationS3Faults|TestIntegrationKafkaBrokerKill|TestIntegrationDiskFull|TestIntegrationDatabricksS3Faults|TestIntegrationSnowflakeRestart|TestIntegrationPartitions|TestIntegrationNetem|TestIntegrationScaleOut|TestIntegrationScaleOutPostgres)$$' ./integration/ ; rc=$$?; \
	$(CHAOS_SUMMARY); $(SERVICES) down; exit $$rc

# The soak: Kafka → Delta, PostgreSQL and Kafka at half their measured peak
# for SOAKTIME, sampled every few seconds; CSV and PNG chart under soak/.
SOAKTIME ?= 30m
soak:
	@$(SERVICES) up kafka postgres python plot && set -a && . integration/services/run/env && set +a && \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_SOAKTIME=$(SOAKTIME) FLIGHTLINE_SOAK_DIR=$(CURDIR)/soak \
		$(GO) test -count=1 -timeout 0 -v -run '^TestIntegrationSoak$$' ./integration/ ; rc=$$?; $(SERVICES) down; exit $$rc

services-up:
	$(SERVICES) up

services-down:
	$(SERVICES) down

# Side-by-side benchmarks interleave their sides round by round
# (FLIGHTLINE_BENCH_ROUNDS rounds) and print medians and ratios; use rounds,
# not -count, for ratios.
bench:
	FLIGHTLINE_BENCH_ROUNDS=5 $(GO) test -run '^$$' -bench . -benchmem ./bench/

# bench/report.md and its charts (bench/report/*.png): the side-by-side
# benchmarks, those that need services too when their environment is
# exported (set -a; . integration/services/run/env; set +a).
# BENCH_ROUNDS, BENCH_JOB_ROUNDS and BENCH_TIME: see bench/report.sh.
bench-report:
	bench/report.sh

vet:
	$(GO) vet ./...

# Each target mutates its seeds for FUZZTIME; a crasher is written under the
# package's testdata/fuzz/ and fails the run.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s $$pkg; \
	done

# The same targets at length: malformed DoPut streams against every sink.
chaos-fuzz:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(CHAOSTIME)

fuzz-long: chaos-fuzz
