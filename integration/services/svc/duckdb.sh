SERVICES+=(duckdb duckdbpy)
# DuckDB's shared library, libduckdb.so, which the duckdb sink and
# `flightline query` load through the ADBC driver manager (its entry point
# duckdb_adbc_init). Taken from the npm package DuckDB publishes its
# Node.js bindings in (a tarball holding libduckdb.so for linux-x64), with
# `npm pack`: no build (`make build` calls `up duckdb` and copies the
# library beside the binary). The second service, duckdbpy, is the tests'
# independent reader: DuckDB's Python package of the same version in a venv
# of its own (FLIGHTLINE_DUCKDB_PYTHON). Nothing runs: `up` records the library's
# absolute path as FLIGHTLINE_DUCKDB_LIB, the variable the flightline
# binary reads too. Cached under $CACHE by version.
DUCKDB_VERSION=1.5.6
DUCKDB_NPM_PACKAGE="@duckdb/node-bindings-linux-x64@$DUCKDB_VERSION-r.1"
duckdb_up() {
	local dir="$CACHE/duckdb-$DUCKDB_VERSION"
	if [ ! -f "$dir/libduckdb.so" ]; then
		command -v npm >/dev/null || apt_install npm
		local tmp
		tmp="$(mktemp -d)"
		(cd "$tmp" && npm pack --silent "$DUCKDB_NPM_PACKAGE" >/dev/null) >&2
		tar -xzf "$tmp"/*.tgz -C "$tmp" package/libduckdb.so
		mkdir -p "$dir"
		mv "$tmp/package/libduckdb.so" "$dir/libduckdb.so.tmp"
		mv "$dir/libduckdb.so.tmp" "$dir/libduckdb.so"
		rm -rf "$tmp"
	fi
	setenv FLIGHTLINE_DUCKDB_LIB "$dir/libduckdb.so"
}
duckdb_down() { :; }
duckdbpy_up() {
	local venv="$CACHE/duckdb-venv"
	if [ ! -f "$venv/.duckdb-$DUCKDB_VERSION" ]; then
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check "duckdb==$DUCKDB_VERSION" >&2
		touch "$venv/.duckdb-$DUCKDB_VERSION"
	fi
	setenv FLIGHTLINE_DUCKDB_PYTHON "$venv/bin/python"
}
duckdbpy_down() { :; }
