SERVICES+=(gcs)
# gcs: fake-gcs-server, a Google Cloud Storage emulator, for the gcs: sink
# (ifGenerationMatch=0 answers 412 on an existing object, as on GCS). Built
# once with `go install` into $CACHE (about 90 s and 700 MB of memory,
# cached afterwards), then run over plain HTTP on 127.0.0.1 with a
# filesystem backend under $RUN/gcs. `up` is idempotent; `down` stops only
# the server this script started.
GCS_VERSION=v1.56.1

gcs_up() {
	local bin="$CACHE/fake-gcs-server-$GCS_VERSION" dir="$RUN/gcs" port
	if [ ! -x "$bin/fake-gcs-server" ]; then
		log "gcs: building fake-gcs-server@$GCS_VERSION (cached afterwards)"
		mkdir -p "$bin"
		retry env GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/fsouza/fake-gcs-server@$GCS_VERSION" >&2
	fi
	mkdir -p "$dir/data"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "gcs: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		nohup "$bin/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$port" -backend filesystem \
			-filesystem-root "$dir/data" -public-host "127.0.0.1:$port" -external-url "http://127.0.0.1:$port" \
			-log-level warn >"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_GCS_ENDPOINT "http://127.0.0.1:$port"
	# The binary, for the tests that run (and restart) an emulator of their own.
	setenv FLIGHTLINE_GCS_BIN "$bin/fake-gcs-server"
}

gcs_down() { stop_pid "$RUN/gcs/pid"; }
