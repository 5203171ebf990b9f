"""Side-by-side benchmarks print their own medians and ratios (the `#`
lines of bench/interleave_test.go); this script is for other runs.

Print the median of each benchmark's MB/s from `go test -bench` output,
and each one's ratio to a named baseline benchmark.

usage: python3 bench/median.py FILE [BASELINE_NAME]
"""
import re
import statistics
import sys
from collections import defaultdict

vals = defaultdict(list)
for line in open(sys.argv[1]):
    # "#NN" is the round of an interleaved side (bench/interleave_test.go).
    m = re.match(r"^(Benchmark\S+?)(#\d+)?(-\d+)?\s+\d+\s+.*?([\d.]+) MB/s", line)
    if m:
        vals[m.group(1)].append(float(m.group(4)))
base = sys.argv[2] if len(sys.argv) > 2 else None
for name, v in vals.items():
    med = statistics.median(v)
    ratio = ""
    if base and base in vals:
        ratio = f"  ratio to {base}: {med / statistics.median(vals[base]):.2f}"
    print(f"{name:45s} median {med:9.1f} MB/s over {len(v)} runs{ratio}")
