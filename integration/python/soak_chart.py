"""Draws the soak's samples (integration/soak_test.go): soak_chart.py CSV PNG.

One panel per series (resident memory and its anonymous part, Go heap allocated and live
after the last GC, the Go runtime's memory from the OS, Arrow allocator bytes, goroutines,
open descriptors, rows/s, commit latency p50/p99, lag, and the Delta table's live, on-disk and
log files), one line per pipeline.
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [
    ("rss_bytes", "resident memory (MiB)", 1 / (1 << 20)),
    ("rss_anon_bytes", "resident memory mapping no file (MiB)", 1 / (1 << 20)),
    ("go_heap_bytes", "Go heap allocated, garbage included (MiB)", 1 / (1 << 20)),
    ("go_heap_live_bytes", "Go heap live after the last GC (MiB)", 1 / (1 << 20)),
    ("go_sys_bytes", "obtained by the Go runtime from the OS (MiB)", 1 / (1 << 20)),
    ("arrow_bytes", "Arrow allocator outstanding (MiB)", 1 / (1 << 20)),
    ("goroutines", "goroutines", 1),
    ("open_fds", "open descriptors", 1),
    ("rows_per_s", "rows/s committed", 1),
    ("commit_p50_s", "commit latency p50 (s)", 1),
    ("commit_p99_s", "commit latency p99 (s)", 1),
    ("lag_records", "lag (records)", 1),
    ("delta_live_files", "Delta: live data files (compaction bounds them)", 1),
    ("delta_disk_files", "Delta: data files on disk (until vacuum)", 1),
    ("delta_log_files", "Delta: _delta_log files", 1),
]


def main(src, dst):
    data = defaultdict(lambda: defaultdict(list))
    with open(src) as f:
        for row in csv.DictReader(f):
            d = data[row["pipeline"]]
            d["t"].append(float(row["t_s"]) / 60)
            for col, _, _ in PANELS:
                v = row.get(col) or ""
                d[col].append(float(v) if v else float("nan"))
    fig, axes = plt.subplots(8, 2, figsize=(14, 26), sharex=True)
    for ax, (col, title, scale) in zip(axes.flat, PANELS):
        for name, d in sorted(data.items()):
            ax.plot(d["t"], [v * scale for v in d[col]], label=name, linewidth=1)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    for ax in axes.flat[len(PANELS):]:
        ax.set_visible(False)
    for ax in axes.flat[len(PANELS) - 2:len(PANELS)]:
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel("minutes")
    axes[0][0].legend()
    fig.suptitle("Flightline soak: Kafka → Delta, PostgreSQL, Kafka")
    fig.tight_layout()
    fig.savefig(dst, dpi=90)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
