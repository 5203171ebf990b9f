SERVICES+=(postgres)
# PostgreSQL: a throwaway cluster under $RUN/pg, owned by the `postgres` OS
# user (initdb refuses root), listening on 127.0.0.1 at a free port, with
# fsync off, and wal_level=logical with room for replication slots (the
# postgres-cdc source's tests; the settings are start options, so every
# start — a restart of an existing cluster included — applies them). Installs the Debian `postgresql` package when no server binaries
# are present. `up` is idempotent: a running cluster is reused. `down` stops
# only the cluster this script started (identified by its data directory).
pg_bin() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
	[ -n "$d" ] && [ -x "$d/initdb" ] && printf '%s' "$d"
}

# as_postgres CMD... runs CMD as the postgres OS user when we are root.
as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
	else
		"$@"
	fi
}

postgres_up() {
	local bin dir="$RUN/pg" port
	bin="$(pg_bin)" || true
	if [ -z "$bin" ]; then
		apt_install postgresql
		bin="$(pg_bin)" || { log "postgres: no initdb after installing postgresql"; return 1; }
	fi
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
	if [ -f "$dir/data/postmaster.pid" ] && as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		port="$(cat "$dir/port")"
		log "postgres: already running on 127.0.0.1:$port"
		local wal
		wal="$(as_postgres "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -Atc 'SHOW wal_level' 2>/dev/null)" || true
		if [ -n "$wal" ] && [ "$wal" != logical ]; then
			log "postgres: running with wal_level=$wal, started before wal_level=logical was set: 'services.sh restart postgres' applies it (the postgres-cdc tests skip until then)"
		fi
	else
		if [ ! -f "$dir/data/PG_VERSION" ]; then
			rm -rf "$dir/data"
			as_postgres "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
				{ cat "$dir/initdb.log" >&2; return 1; }
			# Trust for the superuser over the socket and loopback keeps the
			# cluster throwaway; other roles (the tests create some) need a
			# password, so authentication failures can be tested.
			cat > "$dir/data/pg_hba.conf" <<'HBA'
local all postgres trust
host  all postgres 127.0.0.1/32 trust
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
HBA
			chown postgres: "$dir/data/pg_hba.conf" 2>/dev/null || true
		fi
		port="$(free_port)"
		printf '%s' "$port" > "$dir/port"
		as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
			-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=64 -c wal_sender_timeout=60s" start >/dev/null ||
			{ tail -n 20 "$dir/log" >&2; return 1; }
		wait_port 127.0.0.1 "$port" "$READY_S"
	fi
	setenv FLIGHTLINE_PG_DSN "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

postgres_down() {
	local bin dir="$RUN/pg"
	[ -f "$dir/data/postmaster.pid" ] || return 0
	bin="$(pg_bin)" || return 0
	as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
}
