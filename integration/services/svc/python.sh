SERVICES+=(python)
# Python virtual environment with the independent readers and clients the
# tests use (pyarrow.flight). Cached: rebuilt only when requirements change.
python_up() {
	local venv="$CACHE/venv" req="$HERE/requirements.txt"
	local stamp="$venv/.req-$(sha256sum "$req" | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
		touch "$stamp"
	fi
	setenv FLIGHTLINE_PYTHON "$venv/bin/python"
}
python_down() { :; }
