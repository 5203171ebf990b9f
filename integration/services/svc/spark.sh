SERVICES+=(spark)
# Apache Spark with Delta Lake (pyspark + delta-spark), the reader most Delta
# users have, for the Delta interop test. Its own virtual environment under
# $CACHE/spark-venv (the pins must not break the shared venv); no server: the
# test starts one local-mode Spark session itself. The delta-spark jars are
# resolved by Ivy at the first session start and cached in $CACHE/ivy; `up`
# warms that cache so the first test does not pay for it. Needs Java 17.
spark_up() {
	local venv="$CACHE/spark-venv" req="$HERE/spark/requirements.txt"
	local stamp="$venv/.req-$(sha256sum "$req" | cut -c1-16)"
	if ! command -v java >/dev/null; then apt_install openjdk-17-jre-headless; fi
	if [ ! -f "$stamp" ]; then
		log "spark: installing pyspark and delta-spark (first time: a few minutes)"
		python3 -m venv "$venv" >&2
		# pyspark is an sdist of 434 MB (its jars): pip builds a wheel of it
		# and unpacks that again. Stored, not deflated (the jars are
		# compressed already): 13 s instead of 28 s here on a quiet machine,
		# the same files installed.
		"$venv/bin/pip" install -q --disable-pip-version-check \
			-C--build-option=--compression=stored -r "$req" >&2
		touch "$stamp"
	fi
	mkdir -p "$CACHE/ivy"
	local warm="$CACHE/ivy/.warm-$(sha256sum "$req" | cut -c1-16)"
	if [ ! -f "$warm" ]; then
		log "spark: resolving the delta-spark jars into $CACHE/ivy"
		ROOT="$ROOT" FLIGHTLINE_SPARK_IVY="$CACHE/ivy" "$venv/bin/python" "$HERE/spark/warm.py" >&2
		touch "$warm"
	fi
	setenv FLIGHTLINE_SPARK_PYTHON "$venv/bin/python"
	setenv FLIGHTLINE_SPARK_IVY "$CACHE/ivy"
}
spark_down() { :; }
