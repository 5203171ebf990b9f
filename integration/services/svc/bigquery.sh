SERVICES+=(bigquery)
# BigQuery: github.com/goccy/bigquery-emulator (pure Go, MIT) on 127.0.0.1,
# an HTTP (REST) port and a gRPC port (Storage Write and Read APIs), one
# project and one dataset.
#
# Its build is heavy (10–26 minutes and about 6.5 GB on a 2-core machine, a
# 268 MB binary), so it never runs in the foreground of `up`:
#
#   * `up` with the binary cached under
#     $CACHE/bigquery-emulator-<version>-<go version>/ starts the emulator
#     and records its env at once. The Go version is in the key so that a
#     new toolchain builds afresh (on a machine whose Go build cache is
#     warm that is a link, not the 10–26 minutes); a binary in the older
#     cache directory (no Go version in its name) is taken over when `go
#     version` says it was built by this toolchain.
#   * `up` without it starts the build in the background (CGO_ENABLED=0,
#     nice, its own process group, log in build.log with timestamps) and
#     returns. The build links into a temporary name and renames it into
#     place when done, so a present binary is a whole one. A lock and the
#     build's pid file make a second `up` (or a `wait`) join the running
#     build instead of starting another; a build of the same output path
#     started by hand is joined too.
#   * `wait` (services.sh wait bigquery) waits for the binary, fails with the
#     build log's tail if the build died, then starts the emulator as `up`
#     does. `make test` runs the BigQuery packages last, after `wait`, so
#     the build overlaps every other test.
#   * `down` stops the emulator, its instances (below), and a build this
#     run directory's `up` started (its pid is kept under $RUN too).
#   * BQ_INSTANCE=N with `restart`, `wait` or `down` runs, or stops, a
#     further emulator, instance N: its own process, ports and state under
#     $RUN/bigquery-N/, and its env in $RUN/bigquery-N/env instead of
#     $RUN/env (source it after $RUN/env). `make test` runs the BigQuery
#     packages side by side, each on an instance of its own: the emulator
#     slows as its state grows, and one emulator per package was the
#     reason they ran one after another.
#
# `go install …@v0.8.1` fails on a deprecation lookup, so the build is a
# scratch module that imports the emulator's command package.
#
# What the build spends its time on: the emulator's SQL engine is GoogleSQL
# compiled to WebAssembly and transpiled to Go (github.com/goccy/
# googlesqlwasm2go: 450 MB of generated Go source), on SQLite the same way
# (ncruces/go-sqlite3) and modernc's libc/quickjs translations; one
# package's compile takes most of the time and memory, and there is no
# build tag to leave it out. There is no cgo in it (CGO_ENABLED=0). The
# build drops the symbol table and DWARF (-ldflags=-s -w: a smaller binary
# and a shorter link) and ignores the caller's GOFLAGS (a -race there
# would make it many times slower).
#
# Environment for the tests:
#   FLIGHTLINE_BQ_ENDPOINT  http://127.0.0.1:<http port>  (REST, no auth)
#   FLIGHTLINE_BQ_GRPC      127.0.0.1:<grpc port>         (insecure gRPC)
#   FLIGHTLINE_BQ_PROJECT / FLIGHTLINE_BQ_DATASET
BQ_EMULATOR_VERSION=v0.8.1
BQ_PROJECT=flightline
BQ_DATASET=flightline

bq_dir() { printf '%s' "$CACHE/bigquery-emulator-$BQ_EMULATOR_VERSION-$(go env GOVERSION)"; }
# bq_run is the run directory of the emulator BQ_INSTANCE names (none: the
# default one).
bq_run() { printf '%s' "$RUN/bigquery${BQ_INSTANCE:+-$BQ_INSTANCE}"; }
bq_bin() { printf '%s' "$(bq_dir)/bigquery-emulator"; }

# bq_building reports whether a build of the cached binary is under way:
# ours (pid file) or one started by hand with the same output path.
bq_building() {
	local dir; dir="$(bq_dir)"
	running "$dir/build.pid" && return 0
	pgrep -f -- "go build .*-o $(bq_bin)( |$)" >/dev/null 2>&1
}

# bq_adopt takes over a binary of the older cache directory (named by the
# emulator version only) when this toolchain built it.
bq_adopt() {
	local old="$CACHE/bigquery-emulator-$BQ_EMULATOR_VERSION/bigquery-emulator" bin
	bin="$(bq_bin)"
	[ ! -x "$bin" ] && [ -x "$old" ] || return 0
	[ "$(go version "$old" 2>/dev/null | awk '{print $2}')" = "$(go env GOVERSION)" ] || return 0
	mkdir -p "$(dirname "$bin")"
	ln -f "$old" "$bin" 2>/dev/null || cp "$old" "$bin"
	log "bigquery: took over the emulator built by this Go toolchain from $old"
}

# bq_build_start starts the background build unless the binary is there or
# a build is already running. It returns at once.
bq_build_start() {
	local dir bin; dir="$(bq_dir)"; bin="$(bq_bin)"
	mkdir -p "$dir"
	(
		flock 9
		bq_adopt
		[ -x "$bin" ] && exit 0
		if bq_building; then log "bigquery: emulator build already running (log $dir/build.log)"; exit 0; fi
		log "bigquery: building the emulator $BQ_EMULATOR_VERSION in the background (cached afterwards; log $dir/build.log)"
		# setsid: its own process group, so `down` can stop go and its
		# compilers together; nice: the tests keep the CPU they need.
		setsid nohup nice -n 10 bash -c '
			set -euo pipefail
			dir="$1"; version="$2"
			echo "build start $(date -u +%FT%TZ)"
			mkdir -p "$dir/src" && cd "$dir/src"
			[ -f go.mod ] || go mod init bqemubuild
			printf "package main\n\nimport _ \"github.com/goccy/bigquery-emulator/cmd/bigquery-emulator\"\n\nfunc main() {}\n" > tools.go
			retry go get "github.com/goccy/bigquery-emulator/cmd/bigquery-emulator@$version"
			CGO_ENABLED=0 GOFLAGS= go build -ldflags="-s -w" -o "$dir/bigquery-emulator.tmp" github.com/goccy/bigquery-emulator/cmd/bigquery-emulator
			mv -f "$dir/bigquery-emulator.tmp" "$dir/bigquery-emulator"
			echo "build done $(date -u +%FT%TZ) rc=0"
		' bq-build "$dir" "$BQ_EMULATOR_VERSION" >"$dir/build.log" 2>&1 < /dev/null &
		echo $! > "$dir/build.pid"
		mkdir -p "$RUN/bigquery" && echo $! > "$RUN/bigquery/build.pid"
	) 9>"$dir/build.lock"
}

# bq_start starts the emulator from the cached binary (or reuses a running
# one) and records its env.
bq_start() {
	local dir bin http grpc SETENV_FILE=
	dir="$(bq_run)"; bin="$(bq_bin)"
	[ -z "${BQ_INSTANCE:-}" ] || SETENV_FILE="$dir/env" # an instance's own env
	mkdir -p "$dir"
	if running "$dir/pid"; then
		http="$(cat "$dir/http")"; grpc="$(cat "$dir/grpc")"
		log "bigquery: already running on 127.0.0.1:$http (gRPC $grpc)"
	else
		http="$(free_port)"; grpc="$(free_port)"
		while [ "$grpc" = "$http" ]; do grpc="$(free_port)"; done
		printf '%s' "$http" > "$dir/http"; printf '%s' "$grpc" > "$dir/grpc"
		nohup "$bin" --project="$BQ_PROJECT" --dataset="$BQ_DATASET" --host=127.0.0.1 \
			--port="$http" --grpc-port="$grpc" --log-level=warn >"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$http" "$READY_S" && wait_port 127.0.0.1 "$grpc" "$READY_S" ||
			{ tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_BQ_ENDPOINT "http://127.0.0.1:$http"
	setenv FLIGHTLINE_BQ_GRPC "127.0.0.1:$grpc"
	setenv FLIGHTLINE_BQ_PROJECT "$BQ_PROJECT"
	setenv FLIGHTLINE_BQ_DATASET "$BQ_DATASET"
}

bigquery_up() {
	bq_adopt
	if [ -x "$(bq_bin)" ]; then
		bq_start
	else
		bq_build_start
		log "bigquery: not started yet; \`services.sh wait bigquery\` starts it once the build is done"
	fi
}

# bigquery_wait waits for the build (starting it if need be), then starts
# the emulator.
bigquery_wait() {
	local dir bin; dir="$(bq_dir)"; bin="$(bq_bin)"
	if [ ! -x "$bin" ]; then
		bq_build_start
		log "bigquery: waiting for the emulator build (log $dir/build.log)"
		while [ ! -x "$bin" ]; do
			if ! bq_building; then
				sleep 1 # the rename may have just happened
				[ -x "$bin" ] && break
				log "bigquery: the emulator build failed"; tail -n 30 "$dir/build.log" >&2 || true
				return 1
			fi
			sleep 2
		done
		log "bigquery: emulator build done"
	fi
	bq_start
}

bigquery_down() {
	if [ -n "${BQ_INSTANCE:-}" ]; then
		stop_pid "$(bq_run)/pid"
		return
	fi
	local d
	for d in "$RUN"/bigquery "$RUN"/bigquery-*/; do
		if [ -d "$d" ]; then stop_pid "${d%/}/pid"; fi
	done
	local pidf="$RUN/bigquery/build.pid"
	if running "$pidf"; then
		log "bigquery: stopping the emulator build this run started"
		kill -- "-$(cat "$pidf")" 2>/dev/null || true
	fi
	rm -f "$pidf"
}
