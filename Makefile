# Flightline. `make demo` runs the embedded pipeline; `make test` starts the
# real services the tests need (installing them on first use), runs every
# test with the race detector, and stops the services again.
SHELL := /bin/bash
GO ?= go
SERVICES := integration/services/services.sh
GOTESTFLAGS ?= -race -count=1 -timeout 60m

.PHONY: all build demo test test-unit services-up services-down bench fuzz chaos fuzz-long vet

# The fuzz targets of the wire boundary (package:Target). Their seed corpus
# (internal/doputtest) replays in every `go test`; `make fuzz` mutates each
# for FUZZTIME (part of `make test`), `make chaos` for CHAOSTIME.
FUZZ_TARGETS := ./internal/ipcguard:FuzzCheck ./flightsink:FuzzDoPutNull ./flightsink:FuzzDoPutMemory \
	./flightsink:FuzzDoPutDir ./flightsink/delta:FuzzDoPutDelta
FUZZTIME ?= 10s
CHAOSTIME ?= 15m

all: build

build:
	$(GO) build -o bin/flightline ./cmd/flightline

demo: build
	./bin/flightline demo

# Unit tests only: no services, integration tests skip with a message.
test-unit:
	$(GO) test $(GOTESTFLAGS) ./...

test:
	@$(SERVICES) up
	@set -a; . integration/services/run/env; set +a; \
	export FLIGHTLINE_REQUIRE_SERVICES=1; \
	$(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./... && $(MAKE) --no-print-directory fuzz; rc=$$?; \
	$(SERVICES) down; exit $$rc

services-up:
	$(SERVICES) up

services-down:
	$(SERVICES) down

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./bench/

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
chaos:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(CHAOSTIME)

fuzz-long: chaos
