# Flightline. `make demo` runs the embedded pipeline; `make test` starts the
# real services the tests need (installing them on first use), runs every
# test with the race detector, and stops the services again.
SHELL := /bin/bash
GO ?= go
SERVICES := integration/services/services.sh
GOTESTFLAGS ?= -race -count=1 -timeout 60m

.PHONY: all build demo test test-unit services-up services-down bench fuzz vet chaos

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
	$(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./... ; rc=$$?; \
	$(SERVICES) down; exit $$rc

# Longer runs than `make test` has time for. Each recipe line stands alone
# (starts what it needs, stops it). The kill tests: 100 kill -9s of a random
# process of a three-process Kafka pipeline per exactly-once sink, Delta on
# S3 included (FLIGHTLINE_KILL_SEED=N replays a run's kill schedule).
chaos:
	@$(SERVICES) up kafka postgres python s3 && set -a && . integration/services/run/env && set +a && \
	FLIGHTLINE_REQUIRE_SERVICES=1 FLIGHTLINE_CHAOS=1 $(GO) test -race -count=1 -timeout 120m -v \
		-run '^TestIntegrationSplitKill9$$' ./integration/ ; rc=$$?; $(SERVICES) down; exit $$rc

services-up:
	$(SERVICES) up

services-down:
	$(SERVICES) down

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./bench/

vet:
	$(GO) vet ./...
