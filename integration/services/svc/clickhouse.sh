SERVICES+=(clickhouse)
# ClickHouse stand-in: no current ClickHouse server installs here (Debian's
# is 18.16, from 2018, without insert deduplication tokens or
# non_replicated_deduplication_window), so chdb_server.py serves the part
# of ClickHouse's HTTP interface the ClickHouse sink uses in front of chdb,
# ClickHouse 26.9 as a library (see the script for what differs). chdb is
# a 550 MB wheel, so it gets its own virtual environment under
# $CACHE/venv-chdb; the tests read tables back with that Python and chdb
# directly (FLIGHTLINE_CLICKHOUSE_PYTHON, FLIGHTLINE_CLICKHOUSE_PATH: open
# it only while the front is stopped, or through the front). `up` is
# idempotent: a running front is reused. `down` stops only the front this
# script started (its pid file).
CLICKHOUSE_PIP=('chdb==4.4.0')
CLICKHOUSE_USER=flightline
CLICKHOUSE_PASSWORD=flightline-secret

clickhouse_up() {
	local venv="$CACHE/venv-chdb" dir="$RUN/clickhouse" port
	local stamp="$venv/.req-$(printf '%s\n' "${CLICKHOUSE_PIP[@]}" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		log "clickhouse: installing ${CLICKHOUSE_PIP[*]} into $venv (cached afterwards)"
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check "${CLICKHOUSE_PIP[@]}" >&2
		touch "$stamp"
	fi
	mkdir -p "$dir"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "clickhouse: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		(cd "$dir" && exec nohup "$venv/bin/python" "$HERE/chdb_server.py" -p "$port" --host 127.0.0.1 \
			--path "$dir/db" --user "$CLICKHOUSE_USER" --password "$CLICKHOUSE_PASSWORD" >"$dir/log" 2>&1 </dev/null) &
		echo $! > "$dir/pid" # exec: the pid is the front's own, which down stops
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_CLICKHOUSE_URL "http://127.0.0.1:$port"
	setenv FLIGHTLINE_CLICKHOUSE_USER "$CLICKHOUSE_USER"
	setenv FLIGHTLINE_CLICKHOUSE_PASSWORD "$CLICKHOUSE_PASSWORD"
	setenv FLIGHTLINE_CLICKHOUSE_PYTHON "$venv/bin/python"
}

clickhouse_down() { stop_pid "$RUN/clickhouse/pid"; }
