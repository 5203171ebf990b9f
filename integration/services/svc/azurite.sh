SERVICES+=(azurite)
# azurite: Microsoft's Azure Storage emulator (blob service only), for the
# azblob: sink (Put Blob with If-None-Match: * answers 409 BlobAlreadyExists
# on an existing blob, as Azure does). Installed once with npm into $CACHE
# (about a minute, cached afterwards), then run over plain HTTP on
# 127.0.0.1 with its data under $RUN/azurite. --skipApiVersionCheck: newer
# azblob SDKs send an API version Azurite does not know yet and are refused
# without it; --disableTelemetry: Azurite sends telemetry by default. The
# account is Azurite's well-known development account (devstoreaccount1
# and its published key). `up` is idempotent; `down` stops only the server
# this script started.
AZURITE_VERSION=3.37.0
AZURITE_ACCOUNT=devstoreaccount1
AZURITE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

azurite_up() {
	local pkg="$CACHE/azurite-$AZURITE_VERSION" dir="$RUN/azurite" port
	if [ ! -x "$pkg/node_modules/.bin/azurite-blob" ]; then
		# Under a lock: two npm installs into one prefix (two worktrees'
		# `up` at once) leave it broken for both (2026-12-04: ENOENT in
		# one, "Invalid Version" in every later install).
		(
			flock 9
			[ -x "$pkg/node_modules/.bin/azurite-blob" ] && exit 0
			log "azurite: npm install azurite@$AZURITE_VERSION (cached afterwards)"
			mkdir -p "$pkg"
			npm install --prefix "$pkg" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >&2
		) 9>"$CACHE/azurite-$AZURITE_VERSION.lock" || return 1
	fi
	mkdir -p "$dir/data"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "azurite: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		nohup "$pkg/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$port" \
			--location "$dir/data" --skipApiVersionCheck --disableTelemetry --silent >"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$port" 60 || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_AZURITE_ENDPOINT "http://127.0.0.1:$port/$AZURITE_ACCOUNT"
	setenv FLIGHTLINE_AZURITE_ACCOUNT "$AZURITE_ACCOUNT"
	setenv FLIGHTLINE_AZURITE_KEY "$AZURITE_KEY"
	# The binary, for the tests that run (and restart) an emulator of their own.
	setenv FLIGHTLINE_AZURITE_BIN "$pkg/node_modules/.bin/azurite-blob"
}

azurite_down() { stop_pid "$RUN/azurite/pid"; }
