SERVICES+=(fakesnow)
# Snowflake emulator: fakesnow's HTTP server (Apache-2.0, Python, DuckDB
# underneath) on 127.0.0.1 at a free port. It has pinned, heavy dependencies,
# so it gets its own virtual environment under $CACHE/venv-fakesnow (the
# shared test venv is not touched); the venv also holds
# snowflake-connector-python, the independent client the tests read tables
# back with. snowflake-connector-python must stay below 5: fakesnow's server
# mode does not work with 5.x. `up` is idempotent: a running server is
# reused. `down` stops only the server this script started (its pid file).
FAKESNOW_PIP=('fakesnow[server]==0.12.1' 'snowflake-connector-python<5')

fakesnow_up() {
	# The Snowflake key-pair tests make encrypted PKCS#8 keys with openssl.
	command -v openssl >/dev/null || apt_install openssl
	local venv="$CACHE/venv-fakesnow" dir="$RUN/fakesnow" port
	local stamp="$venv/.req-$(printf '%s\n' "${FAKESNOW_PIP[@]}" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		log "fakesnow: installing ${FAKESNOW_PIP[*]} into $venv (cached afterwards)"
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check "${FAKESNOW_PIP[@]}" >&2
		touch "$stamp"
	fi
	mkdir -p "$dir"
	if running "$dir/pid"; then
		port="$(cat "$dir/port")"
		log "fakesnow: already running on 127.0.0.1:$port"
	else
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		# fakesnow keeps its databases in memory (stages are files under
		# /tmp). fakesnow_server.py is fakesnow's server plus the roll-back
		# of a dead client's open transaction, which Snowflake does and
		# fakesnow does not (see the script).
		# FLIGHTLINE_FAKESNOW_TRACE=1 writes every statement it runs, in
		# order, to $dir/trace (for diagnosing a failed test; it grows fast).
		local trace=()
		[ "${FLIGHTLINE_FAKESNOW_TRACE:-}" = 1 ] && trace=(--trace "$dir/trace")
		(cd "$dir" && exec nohup "$venv/bin/python" "$HERE/fakesnow_server.py" -p "$port" --host 127.0.0.1 --idle 20 "${trace[@]}" >"$dir/log" 2>&1 </dev/null) &
		echo $! > "$dir/pid" # exec: the pid is the server's own, which down stops
		wait_port 127.0.0.1 "$port" "$READY_S" || { tail -n 20 "$dir/log" >&2; return 1; }
	fi
	setenv FLIGHTLINE_SNOWFLAKE_HOST "127.0.0.1"
	setenv FLIGHTLINE_SNOWFLAKE_PORT "$port"
	setenv FLIGHTLINE_SNOWFLAKE_PYTHON "$venv/bin/python"
}

fakesnow_down() { stop_pid "$RUN/fakesnow/pid"; }
