SERVICES+=(adbc)
# ADBC C drivers for PostgreSQL and SQLite, from their Python wheels, in a
# venv of their own under $CACHE (their pins cannot disturb the shared one).
# Nothing runs: `up` records the absolute paths of the shared libraries
# (FLIGHTLINE_ADBC_POSTGRESQL_DRIVER, FLIGHTLINE_ADBC_SQLITE_DRIVER) and of
# the sqlite3 CLI the kill tests check with. Cached: reinstalled only when
# the pinned versions change.
ADBC_DRIVERS_VERSION=1.13.0
adbc_up() {
	local venv="$CACHE/adbc-venv"
	local stamp="$venv/.drivers-$ADBC_DRIVERS_VERSION"
	if [ ! -f "$stamp" ]; then
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check \
			"adbc-driver-postgresql==$ADBC_DRIVERS_VERSION" "adbc-driver-sqlite==$ADBC_DRIVERS_VERSION" >&2
		touch "$stamp"
	fi
	local name so
	for name in postgresql sqlite; do
		so="$(ls "$venv"/lib/python3*/site-packages/adbc_driver_"$name"/libadbc_driver_"$name".so 2>/dev/null | head -n1)"
		[ -n "$so" ] || { log "adbc: libadbc_driver_$name.so missing from $venv"; return 1; }
		setenv "FLIGHTLINE_ADBC_${name^^}_DRIVER" "$so"
	done
	command -v sqlite3 >/dev/null || apt_install sqlite3
	setenv FLIGHTLINE_SQLITE3 "$(command -v sqlite3)"
}
adbc_down() { :; }
