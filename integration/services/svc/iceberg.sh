SERVICES+=(iceberg)
# A virtual environment with pyiceberg (SqlCatalog on SQLite, pyarrow) as
# the independent reader of the Iceberg sink's tables, apart from the
# shared venv so its pins cannot break that one. Cached: rebuilt only when
# the pins change. pyiceberg's SqlCatalog reads the catalog tables
# iceberg-go's SQL catalog writes (the JDBC catalog's layout). The glue
# extra (boto3) lets its GlueCatalog read the Iceberg sink's Glue tables on
# moto, and the athena sink's tests check Glue and S3 with boto3.
ICEBERG_PINS="pyiceberg[sql-sqlite,pyarrow,glue]==0.12.0"
iceberg_up() {
	local venv="$CACHE/venv-pyiceberg"
	local stamp="$venv/.req-$(echo "$ICEBERG_PINS" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		python3 -m venv "$venv" >&2
		# shellcheck disable=SC2086
		"$venv/bin/pip" install -q --disable-pip-version-check $ICEBERG_PINS >&2
		touch "$stamp"
	fi
	setenv FLIGHTLINE_PYICEBERG_PYTHON "$venv/bin/python"
}
iceberg_down() { :; }
