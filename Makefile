# Flightline. `make demo` runs the embedded pipeline; `make test` starts the
# real services the tests need (installing them on first use), runs every
# test with the race detector, and stops the services again.
SHELL := /bin/bash
GO ?= go
SERVICES := integration/services/services.sh
GOTESTFLAGS ?= -race -count=1 -timeout 60m
# -trimpath (for every go command make runs, and those the tests run): the
# build cache is then keyed by the code, not by the clone's directory, so a
# fresh clone (a CI runner's, at a new path each time) reuses what the last
# run on the machine compiled and linked. Without it every clone recompiled
# the project's packages and relinked every race test binary: 167 s of wall
# (265 CPU-s) on 2 cores to build all test binaries, 104 s (141 CPU-s) with it.
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)

.PHONY: python test-python
.PHONY: duckdb-lib
.PHONY: all build demo test test-vet test-build fuzz-build test-go test-integration test-units test-bigquery test-unit test-interop services-up services-down bench bench-report fuzz chaos chaos-kill chaos-fuzz fuzz-long vet soak

# The fuzz targets of the wire boundary (package:Target). Their seed corpus
# (flightsink/doputtest) replays in every `go test`; `make fuzz` mutates each
# for FUZZTIME (part of `make test`), `make chaos` for CHAOSTIME.
FUZZ_TARGETS := ./internal/ipcguard:FuzzCheck ./flightsink:FuzzDoPutNull ./flightsink:FuzzDoPutMemory \
	./flightsink:FuzzDoPutDir ./flightsink/delta:FuzzDoPutDelta
FUZZ_PKGS := $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))
FUZZTIME ?= 10s
CHAOSTIME ?= 15m

all: build

# cgo is required: the ADBC driver manager (adbc/) is C++ reached through
# cgo. Without it the binary builds but the adbc kinds refuse C drivers.
# The commit flightline version prints where Go stamps no VCS information.
FLIGHTLINE_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	CGO_ENABLED=1 $(GO) build -ldflags "-X main.commit=$(FLIGHTLINE_COMMIT)" -o bin/flightline ./cmd/flightline
	@$(MAKE) --no-print-directory duckdb-lib || echo "make build: libduckdb.so was not fetched; the duckdb: sink, pipelines without sink: and flightline query need it (docs/sinks/duckdb.md)" >&2

# DuckDB's libduckdb.so beside the binary, where flightline finds it (the
# duckdb: sink, pipelines without sink:, flightline query): fetched once by
# the duckdb service script (npm pack), cached under ~/.cache/flightline.
duckdb-lib:
	@$(SERVICES) up duckdb >/dev/null 2>&1 && set -a && . integration/services/run/env && set +a && \
		mkdir -p bin && cp -f "$$FLIGHTLINE_DUCKDB_LIB" bin/libduckdb.so

demo: build
	./bin/flightline demo

# Unit tests only: no services, integration tests skip with a message.
test-unit:
	$(GO) test $(GOTESTFLAGS) ./...

# What needs the BigQuery emulator: these packages, and the tests named
# TestIntegrationBigQuery* of ./integration/. Its first build takes 10–30
# minutes, so `services.sh up` only starts it in the background; they run
# in a last phase, after every other test and the fuzz targets, once
# `services.sh wait bigquery` has the emulator built. The packages run side
# by side, each on an emulator instance of its own started afresh: the
# emulator is one SQLite database (the sink's tests do not retry a call
# another process's lock failed), and it slows as its state grows — the
# crash test's 500-row MERGEs went from about 2 s to 15 s after the
# packages' tests had run on the same emulator.
BQ_PKGS := ./flightsink/bigquery/... ./flightsrc/bigquery/...
BQ_INTEGRATION := ^TestIntegrationBigQuery

# The fault and kill tests append their summary rows here (JSON lines);
# make test and make chaos print one table of them at the end.
CHAOS_REPORT ?= $(CURDIR)/chaos-report.jsonl
CHAOS_SUMMARY = $(GO) run ./integration/chaossummary $(CHAOS_REPORT)

# make test runs in phases, each through $(PHASE) NAME CMD, which records
# its seconds for the phase table printed at the end (with the chaos table,
# the slowest tests, each package's wall time and the test totals, from the
# go test -json output testtime saved). The race build of the integration
# package (build) runs beside the services' start, which on a fresh machine
# is mostly downloads and builds of other languages' code; the test lanes
# start when both are done. vet (go vet, the no-cgo build, the fuzz
# targets' instrumented builds) starts then, with the modules the build
# downloaded, and runs beside the lanes at nice 19: on a fresh machine its
# three more compiles of the dependency graph take the CPU the tests leave
# idle instead of holding them back (stop 49 measured vet and the race
# build together at 1,258 s there, the services at 690 s); on a warm one
# it takes a few minutes of idle CPU. Its failure fails make test at the
# end.
# Adding a phase is one line of the
# recipe: `$(PHASE) NAME $(MAKE) --no-print-directory TARGET && \`.
# The go test phases pipe -json through testtime -follow, which prints what
# go test prints without -v (ok/FAIL lines, build errors, a failing test's
# output); each runs under pipefail, so the status is go test's.
# The heavy matrices (100 kills per sink, the 30-kill crash loops, the soak,
# long fuzzing) run in make chaos / make soak: see docs/testing.md.
TEST_OUT ?= $(CURDIR)/test-out
TESTTIME := bin/testtime
PHASE = integration/testtime/phase.sh $(TEST_OUT)/phases
TESTTIME_FOLLOW = $(TESTTIME) -follow -save $(TEST_OUT)
# Not in make test's main phase: the soak (make soak), the tests and
# subtests only make chaos runs (they skip themselves without
# FLIGHTLINE_CHAOS=1, and a skipped integration test fails make test's
# summary) and the BigQuery integration tests (their own phase). go test
# splits -skip at top-level | first, then each alternative at /.
CHAOS_ONLY := ^TestIntegrationNetem$$|^TestIntegrationAMQPBrokerKill$$|^TestIntegrationStoreRestart$$|^TestIntegrationRabbitStreamKill9Kafka$$|^TestIntegrationStoreKill9Kafka$$/^(gcs|azblob|sftp|s3)$$
TEST_SKIP := ^TestIntegrationSoak$$|$(CHAOS_ONLY)|$(BQ_INTEGRATION)
# make test's go tests run in two lanes at once: the integration package
# alone (-p 1: its kill tests' recovery bounds are measured, so nothing of
# its own runs beside them) followed by the fuzz targets and the Python
# package's tests, and the unit packages one at a time (-p 1) followed by
# the BigQuery phase. Before, fuzz, Python and BigQuery waited for the
# integration package (ci24: the unit packages ended at 1,109 s, the
# integration package at 1,190 s, then 322 s more ran alone); ci26
# measured the lanes at 1,175 + 61 s (integration, fuzz) and 1,093 + 31 +
# 246 s (unit, python, BigQuery), hence Python in the first lane.
TEST_P ?= 1
# How many of the integration package's parallel tests and subtests run at
# once (go test's -parallel; its default is the number of CPUs, 2 here):
# the per-sink kill runs of TestIntegrationSplitKill9 spend most of their
# time waiting for processes to start, die and commit, and four of them
# side by side still recover well within the kill bound (docs/testing.md).
INTEGRATION_PARALLEL ?= 4

$(TESTTIME): integration/testtime/main.go
	@CGO_ENABLED=0 $(GO) build -o $@ ./integration/testtime

test: $(TESTTIME)
	@rm -rf $(TEST_OUT) $(CHAOS_REPORT); mkdir -p $(TEST_OUT); \
	$(PHASE) build $(MAKE) --no-print-directory test-build >$(TEST_OUT)/build.log 2>&1 & bld=$$!; \
	$(PHASE) services-up $(SERVICES) up; up=$$?; wait $$bld; brc=$$?; cat $(TEST_OUT)/build.log; \
	nice -n 19 $(PHASE) vet $(MAKE) --no-print-directory test-vet fuzz-build >$(TEST_OUT)/vet.log 2>&1 & vet=$$!; \
	if [ $$up = 0 ] && [ $$brc = 0 ]; then \
		set -a && . integration/services/run/env && set +a && \
		export FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_CHAOS_REPORT=$(CHAOS_REPORT); \
		{ $(PHASE) integration $(MAKE) --no-print-directory test-integration && \
		  $(PHASE) fuzz $(MAKE) --no-print-directory fuzz && \
		  $(PHASE) python $(MAKE) --no-print-directory test-python; } & integ=$$!; \
		$(PHASE) unit $(MAKE) --no-print-directory test-units && \
		$(PHASE) bigquery $(MAKE) --no-print-directory test-bigquery; rc=$$?; \
		wait $$integ; irc=$$?; [ $$rc != 0 ] || rc=$$irc; \
	else rc=1; fi; \
	wait $$vet; vrc=$$?; cat $(TEST_OUT)/vet.log; [ $$rc != 0 ] || rc=$$vrc; \
	$(CHAOS_SUMMARY); $(PHASE) services-down $(SERVICES) down; \
	$(TESTTIME) -phases $(TEST_OUT)/phases -require-run '/integration$$' $(TEST_OUT)/*.json || \
		{ [ $$rc != 0 ] || rc=1; }; exit $$rc

# make test's phases, also on their own (with the services' env exported).
# test-build builds the integration package's race test binary (and so
# most packages' race builds), beside the services' start: the two test
# lanes then find them in the cache instead of compiling them twice at once.
test-vet:
	$(GO) vet ./... && CGO_ENABLED=0 $(GO) build ./... && CGO_ENABLED=0 $(GO) test -count=1 ./adbc/

# Beside it, it compiles (without linking: go list -export) the packages
# of the race binary the integration tests build (crash_test.go's
# flightlineBin): the command imports every connector, the test package
# does not, and on a fresh machine that build inside the first kill test
# took 164 s (stop 49); left to the test, it is a link. It starts by
# downloading the modules, up to 3 times: on a fresh machine the module
# proxy ended a download early once ("unexpected EOF", stop 49, with
# several go commands downloading at once), which go does not retry; on a
# warm machine it finds them all in the module cache.
test-build:
	@for i in 1 2 3; do $(GO) mod download && break; \
		if [ $$i = 3 ]; then exit 1; fi; echo "go mod download failed ($$i of 3), again in 10 s" >&2; sleep 10; done
	@d=$$(mktemp -d); \
	CGO_ENABLED=1 $(GO) list -race -export -deps ./cmd/flightline >/dev/null & l=$$!; \
	CGO_ENABLED=1 $(GO) test -race -c -o $$d/integration.test ./integration/; rc=$$?; \
	wait $$l || rc=1; rm -rf $$d; exit $$rc

# The fuzz targets' instrumented test binaries, built ahead (make test's
# vet job, at nice 19): on a fresh machine the fuzz phase spent 200 of its
# 264 s compiling them (stop 49).
fuzz-build:
	@d=$$(mktemp -d) && for p in $(FUZZ_PKGS); do $(GO) test -c -fuzz=. -o $$d/fuzz.test $$p || { rm -rf $$d; exit 1; }; done; rm -rf $$d

# Every package but the BigQuery ones: the integration package and the
# unit packages, at once, as make test runs them.
test-go:
	@$(MAKE) --no-print-directory test-integration & integ=$$!; \
	$(MAKE) --no-print-directory test-units; rc=$$?; wait $$integ; irc=$$?; [ $$rc != 0 ] || rc=$$irc; exit $$rc

test-integration: $(TESTTIME)
	@set -o pipefail; mkdir -p $(TEST_OUT); \
	CGO_ENABLED=1 $(GO) test -json -p 1 -parallel $(INTEGRATION_PARALLEL) $(GOTESTFLAGS) -skip '$(TEST_SKIP)' ./integration/ | \
		$(TESTTIME_FOLLOW)/integration.json

test-units: $(TESTTIME)
	@set -o pipefail; mkdir -p $(TEST_OUT); \
	bq=$$($(GO) list $(BQ_PKGS)) && rest=$$($(GO) list ./... | grep -vxF "$$bq" | grep -vx '.*/integration') && \
	CGO_ENABLED=1 $(GO) test -json -p $(TEST_P) $(GOTESTFLAGS) $$rest | \
		$(TESTTIME_FOLLOW)/units.json

# The BigQuery packages and the BigQuery integration tests, side by side,
# each on an emulator instance of its own started afresh (see BQ_PKGS; one
# after another on one emulator they took 243 s in ci29, the longest of
# them 112 s), each step's go test -json in bigquery-N.json.
test-bigquery: $(TESTTIME)
	@set -o pipefail; mkdir -p $(TEST_OUT); \
	$(SERVICES) wait bigquery || exit 1; \
	n=0; pids=(); for p in integration $$($(GO) list $(BQ_PKGS)); do \
		n=$$((n+1)); \
		( export BQ_INSTANCE=$$n; \
		  $(SERVICES) restart bigquery && set -a && . integration/services/run/env && \
		  . integration/services/run/bigquery-$$n/env && set +a || exit 1; \
		  if [ $$p = integration ]; then run=(-run '$(BQ_INTEGRATION)' ./integration/); else run=($$p); fi; \
		  CGO_ENABLED=1 $(GO) test -json $(GOTESTFLAGS) "$${run[@]}" | $(TESTTIME_FOLLOW)/bigquery-$$n.json; \
		  rc=$$?; $(SERVICES) down bigquery; exit $$rc ) & pids+=($$!); \
	done; \
	rc=0; for pid in "$${pids[@]}"; do wait $$pid || rc=1; done; exit $$rc

# The whole Delta interop test with Apache Spark (pyspark + delta-spark in
# their own venv; `make test` runs its fast part: the demo's and a
# generator table): also a schema-evolved table, Spark's own DELETE,
# OPTIMIZE and VACUUM followed by a Flightline resume, and v2 checkpoints.
test-interop:
	@$(SERVICES) up python spark && set -a && . integration/services/run/env && set +a && \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_INTEROP=1 $(GO) test -race -count=1 -timeout 60m -v \
		-run '^TestInteropSpark$$' ./integration/ ; rc=$$?; $(SERVICES) down; exit $$rc

# Longer runs than `make test` has time for. Each recipe line stands alone
# (starts what it needs, stops it). The single-process and older split
# crash loops at full length (24–32 kills each, 10 in make test). The kill
# tests: 100 kill -9s of a random
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

# The tests FLIGHTLINE_CHAOS=1 makes longer (make test runs them short:
# 10 kills per crash loop; see docs/testing.md).
CHAOS_TESTS := TestIntegrationSplitKill9|TestIntegrationQuickSourceRestart|TestIntegrationPostgresRestart|TestIntegrationS3Faults|TestIntegrationKafkaBrokerKill|TestIntegrationDiskFull|TestIntegrationDatabricksS3Faults|TestIntegrationSnowflakeRestart|TestIntegrationPartitions|TestIntegrationNetem|TestIntegrationScaleOut|TestIntegrationScaleOutPostgres|TestIntegrationPostgresCrashKill9|TestIntegrationS3CrashKill9|TestIntegrationDeltaCrashKill9|TestIntegrationKafkaDeltaCrashKill9|TestIntegrationKafkaDeltaSplitKill9|TestIntegrationKafkaSinkCrashKill9|TestIntegrationBigQueryCrashKill9|TestCrashDemoKill9|TestCrashSplitProcessesKill9|TestIntegrationDeltaCompactionKill9|TestIntegrationChainFailover|TestIntegrationDuckDBCrashKill9|TestIntegrationStoreKill9Generator|TestIntegrationStoreKill9Kafka|TestIntegrationAMQPKill9|TestIntegrationStoreRestart|TestIntegrationAMQPBrokerKill|TestIntegrationPostgresCDCKill9|TestIntegrationIcebergKill9Kafka|TestIntegrationClickHouseKill9|TestIntegrationRabbitStreamKill9Generator|TestIntegrationRabbitStreamKill9Kafka

chaos-kill:
	@$(SERVICES) up kafka postgres python s3 moto adbc duckdb duckdbpy fakesnow bigquery gcs azurite sftp rabbitmq iceberg clickhouse && $(SERVICES) wait bigquery && \
	set -a && . integration/services/run/env && set +a && \
	rm -f $(CHAOS_REPORT) && FLIGHTLINE_CHAOS_REPORT=$(CHAOS_REPORT) \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_CHAOS=1 $(GO) test -race -count=1 -timeout 180m -v \
		-run '^($(CHAOS_TESTS))$$' ./integration/ ; rc=$$?; \
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

# The Python package (python/, docs/python.md). `make python` builds the
# wheel, carrying the flightline binary as a script, into python/dist/.
# `make test-python` runs its pytest suite in a venv kept outside the clone
# (PYVENV), against a binary built here (the Kafka test needs the services'
# env; it skips without it unless FLIGHTLINE_REQUIRE_SERVICES=1).
PYVENV ?= $(HOME)/.cache/flightline/venv-python-pkg
PYTHON3 ?= python3

$(PYVENV)/.ready:
	$(PYTHON3) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q 'pyarrow>=14' 'pytest>=7' 'pydantic>=2' 'deltalake>=0.17' 'polars>=0.20' 'hatchling>=1.26'
	touch $@

python: $(PYVENV)/.ready
	rm -rf python/build python/dist
	cd python && CGO_ENABLED=1 $(PYVENV)/bin/pip wheel -q --no-deps --no-build-isolation -w dist .
	@ls -l python/dist/

test-python: $(PYVENV)/.ready
	CGO_ENABLED=1 $(GO) build -o bin/flightline-py ./cmd/flightline
	cd python && FLIGHTLINE_BINARY=none $(PYVENV)/bin/pip install -q --no-deps --no-build-isolation --force-reinstall .
	@if [ -f integration/services/run/env ]; then set -a; . integration/services/run/env; set +a; fi; \
	cd python && FLIGHTLINE_BIN=$(CURDIR)/bin/flightline-py $(PYVENV)/bin/python -m pytest -q -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc = 5 ]; then echo "test-python: pytest collected no tests" >&2; fi; exit $$rc
