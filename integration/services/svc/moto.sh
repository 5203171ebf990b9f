SERVICES+=(moto)
# moto: a fake AWS (STS AssumeRole and S3, conditional PUT included) for
# the Databricks / Unity Catalog tests, whose fake catalog vends real
# temporary credentials from moto's STS, and the Athena/Glue tests. moto
# has heavy, pinned dependencies, so it gets its own venv under $CACHE
# rather than the shared requirements.txt. Only the extras of the services
# the tests call (S3, STS, Glue, Athena) and the server's Flask: the
# `server` extra adds cfn-lint, docker, xray and more (64 packages, 318 MB,
# 64 s to install warm here, the longest install of a fresh machine's
# set-up under load; these 32 packages, 142 MB, 19 s) — every test that
# reaches moto passed on both. moto does not enforce session policies or credential
# expiry: the fake catalog's S3 proxy (internal/testkit/uctest) rejects
# expired vended keys. `up` is idempotent; `down` stops only the server this
# script started.
MOTO_VERSION=5.2.5

moto_up() {
	local venv="$CACHE/venv-moto" dir="$RUN/moto" port
	if [ ! -f "$venv/.moto-$MOTO_VERSION-lean" ]; then
		log "moto: installing moto[s3,sts,glue,athena]==$MOTO_VERSION and Flask (cached afterwards)"
		rm -rf "$venv"
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check "moto[s3,sts,glue,athena]==$MOTO_VERSION" \
			"flask!=2.2.0,!=2.2.1" flask-cors >&2
		touch "$venv/.moto-$MOTO_VERSION-lean"
	fi
	mkdir -p "$dir"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "moto: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		nohup "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$dir/log" 2>&1 &
		echo $! > "$dir/pid"
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_MOTO_ENDPOINT "http://127.0.0.1:$port"
}

moto_down() { stop_pid "$RUN/moto/pid"; }
