SERVICES+=(s3)
# S3: versitygw (Apache-2.0, Go) serving a posix directory under $RUN/s3 on
# 127.0.0.1 at a free port, with fixed test credentials. The binary is
# built once with `go install` (≈4 min) and cached under $CACHE/bin. `up` is
# idempotent: a running gateway is reused. `down` stops only the gateway
# this script started (its pid file).
S3_VERSITYGW_VERSION=v1.8.0
S3_ACCESS=flightline-test
S3_SECRET=flightline-test-secret

s3_up() {
	local dir="$RUN/s3" bin="$CACHE/bin/versitygw" port
	if [ ! -x "$bin" ] || [ "$(cat "$CACHE/bin/.versitygw-version" 2>/dev/null)" != "$S3_VERSITYGW_VERSION" ]; then
		log "s3: building versitygw $S3_VERSITYGW_VERSION (cached afterwards)"
		mkdir -p "$CACHE/bin"
		retry env GOBIN="$CACHE/bin" go install "github.com/versity/versitygw/cmd/versitygw@$S3_VERSITYGW_VERSION" >&2
		printf '%s' "$S3_VERSITYGW_VERSION" > "$CACHE/bin/.versitygw-version"
	fi
	mkdir -p "$dir/data"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "s3: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		nohup "$bin" --port "127.0.0.1:$port" --access "$S3_ACCESS" --secret "$S3_SECRET" --quiet posix "$dir/data" \
			>"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_S3_ENDPOINT "http://127.0.0.1:$port"
	setenv FLIGHTLINE_S3_ACCESS_KEY "$S3_ACCESS"
	setenv FLIGHTLINE_S3_SECRET_KEY "$S3_SECRET"
	setenv FLIGHTLINE_S3_REGION "us-east-1"
}

s3_down() { stop_pid "$RUN/s3/pid"; }
