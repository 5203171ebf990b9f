#!/usr/bin/env bash
# `make bench-report`: runs the side-by-side benchmarks of bench/ with their
# sides interleaved round by round, and writes bench/report.md, its charts
# (bench/report/*.png) and the raw outputs (bench/report/*.txt).
#
# The benchmarks that need services run when their environment is exported
# (integration/services/services.sh up python kafka s3 postgres adbc gcs
# azurite sftp rabbitmq iceberg, then
# `set -a; . integration/services/run/env; set +a`, as for any benchmark)
# and skip otherwise; run/env is not read here, since it outlives
# `services.sh down`. The plot venv (services.sh up plot, cached) draws the
# charts.
#
# BENCH_ROUNDS (default 5) rounds of the micro-benchmarks, each side's round
# lasting BENCH_TIME (default 300ms); BENCH_JOB_ROUNDS (default 3) rounds of
# the benchmarks whose op is a whole job (1M rows into a service), one op per
# round.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${BENCH_ROUNDS:-5}
JOB_ROUNDS=${BENCH_JOB_ROUNDS:-3}
TIME=${BENCH_TIME:-300ms}
MICRO='^Benchmark(FlightHop|FlightHopBatchSize|FlightHopValidation|TransformHop|KafkadecodeRaw|KafkadecodeJSON|KafkadecodeAvro|KafkadecodeJSONPipeline|ParquetWrite|StdoutJSONL)$'
JOBS='^Benchmark(S3|KafkaSink|KafkaSource|Postgres|PostgresCDCSnapshot|PostgresCDCStream|ADBCPostgres|KafkaToDelta|ObjsinkFile|ObjsinkGCS|ObjsinkAzblob|ObjsinkSFTP|AMQPSink|Iceberg)$'
if [ -z "${FLIGHTLINE_PLOT_PYTHON:-}" ]; then
	integration/services/services.sh up plot >&2
	FLIGHTLINE_PLOT_PYTHON=$(sed -n 's/^FLIGHTLINE_PLOT_PYTHON=//p' integration/services/run/env)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" ./bench/
mkdir -p bench/report
cat > bench/report/command.txt <<CMD
go test -c -o /tmp/bench.test ./bench/ && cd bench
FLIGHTLINE_BENCH_ROUNDS=$ROUNDS /tmp/bench.test -test.run '^\$' -test.benchmem -test.benchtime $TIME \\
  -test.bench '$MICRO'
FLIGHTLINE_BENCH_ROUNDS=$JOB_ROUNDS /tmp/bench.test -test.run '^\$' -test.benchtime 1x \\
  -test.bench '$JOBS'
# services exported: $(env | sed -n 's/^\(FLIGHTLINE_[A-Z0-9_]*\)=.*/\1/p' | grep -v PLOT | sort | tr '\n' ' ')
CMD
before=$(cut -d' ' -f1-3 /proc/loadavg)
cd bench
FLIGHTLINE_BENCH_ROUNDS=$ROUNDS "$tmp/bench.test" -test.run '^$' -test.benchmem -test.benchtime "$TIME" \
	-test.bench "$MICRO" -test.timeout 60m | tee report/micro.txt
FLIGHTLINE_BENCH_ROUNDS=$JOB_ROUNDS "$tmp/bench.test" -test.run '^$' -test.benchtime 1x \
	-test.bench "$JOBS" -test.timeout 60m | tee report/jobs.txt
after=$(cut -d' ' -f1-3 /proc/loadavg)
"$FLIGHTLINE_PLOT_PYTHON" report.py . report/command.txt "$before" "$after" report/micro.txt report/jobs.txt
