SERVICES+=(polars)
# A virtual environment with polars and pyarrow for the polars transform
# example (examples/transforms/polars), apart from the shared venv so its
# pins cannot break that one. Cached: rebuilt only when the pins change.
POLARS_PINS="polars==2.1.0 pyarrow==26.0.1"
polars_up() {
	local venv="$CACHE/venv-polars"
	local stamp="$venv/.req-$(echo "$POLARS_PINS" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		python3 -m venv "$venv" >&2
		# shellcheck disable=SC2086
		"$venv/bin/pip" install -q --disable-pip-version-check $POLARS_PINS >&2
		touch "$stamp"
	fi
	setenv FLIGHTLINE_POLARS_PYTHON "$venv/bin/python"
}
polars_down() { :; }
