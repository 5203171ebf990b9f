SERVICES+=(plot)
# A virtual environment with matplotlib for the soak's chart
# (integration/python/soak_chart.py), apart from the shared venv so its pins
# cannot break that one. Cached: rebuilt only when the pins change.
PLOT_PINS="matplotlib==3.11.2"
plot_up() {
	local venv="$CACHE/venv-plot"
	local stamp="$venv/.req-$(echo "$PLOT_PINS" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		python3 -m venv "$venv" >&2
		# shellcheck disable=SC2086
		"$venv/bin/pip" install -q --disable-pip-version-check $PLOT_PINS >&2
		touch "$stamp"
	fi
	setenv FLIGHTLINE_PLOT_PYTHON "$venv/bin/python"
}
plot_down() { :; }
