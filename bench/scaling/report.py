"""Draw the scaling chart and write the scaling section of bench/report.md
from the JSON that bench/scaling writes (-json).

usage: report.py OUT_DIR [--note FILE.md] LABEL=FILE.json [LABEL=FILE.json ...]

Writes OUT_DIR/report/scaling.md (the table: rows/s, ratio to one core,
CPU seconds, per label, scenario and core count; medians of the rounds)
and OUT_DIR/report/scaling.png (rows/s and the ratio to one core against
cores). bench/report.py appends scaling.md to report.md. Needs matplotlib
(the plot venv: FLIGHTLINE_PLOT_PYTHON, integration/services/services.sh
up plot). --note puts FILE.md (what the figures show) under the heading.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out_dir = sys.argv[1]
args = sys.argv[2:]
note = ""
if args[:1] == ["--note"]:
    note = open(args[1]).read().strip()
    args = args[2:]
runs = []  # (label, report)
for arg in args:
    label, path = arg.split("=", 1)
    runs.append((label, json.load(open(path))))


def median(v):
    v = sorted(v)
    if not v:
        return float("nan")
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def table(rep):
    """{scenario: {cores: dict of medians}}"""
    out = {}
    for r in rep["runs"]:
        out.setdefault(r["scenario"], {}).setdefault(r["cores"], []).append(r)
    res = {}
    for sc, by in out.items():
        res[sc] = {}
        for n, rs in sorted(by.items()):
            res[sc][n] = {
                "rows_per_s": median([r["rows_per_s"] for r in rs]),
                "rounds": [r["rows_per_s"] for r in rs],
                "cpu": median([r["cpu_s_total"] for r in rs]),
                "sink_cpu": median([r["cpu_s"].get("sink", 0) for r in rs]),
                "source_cpu": median([r["cpu_s"].get("source", 0) for r in rs]),
                "run_cpu": median([r["cpu_s"].get("run", 0) for r in rs]),
                "rss": median([r.get("sink_peak_rss_mib", 0) for r in rs]),
                "rows": rs[0]["rows"],
            }
    return res


lines = ["## Scaling: one pipeline on 1, 2, 4 … cores", "",
         "`bench/scaling` (see its doc comment): the three processes of one pipeline",
         "(`serve-source`, `serve-sink delta:DIR`, `run`) pinned with `taskset` to the first",
         "N cores; rows/s from the start of `run` to its end (generator) or to the",
         "last row in the Delta log (Kafka), medians of interleaved rounds; CPU-s of",
         "the three processes (user + system, start-up included; the Kafka broker's",
         "not counted). Ratios are to the same label's one-core median.", ""]
if note:
    lines += [note, ""]
for label, rep in runs:
    lines += [f"### {label}", "",
              f"* {rep['date']}, commit `{rep['commit']}`, {rep['nproc']} cores (`{rep['cpu_model']}`),"
              f" load average before {rep['load_start']}, after {rep['load_end']}",
              f"* command: `{rep['command']}`", "",
              "| scenario | cores | rows/s (median) | ratio to 1 core | CPU-s all | source / sink / run CPU-s | sink peak RSS MiB | rounds (rows/s) |",
              "|---|---|---|---|---|---|---|---|"]
    for sc, by in table(rep).items():
        base = by.get(1, {}).get("rows_per_s")
        for n, m in by.items():
            ratio = f"**{m['rows_per_s'] / base:.2f}×**" if base else "–"
            lines.append(f"| {sc} ({m['rows']:,} rows) | {n} | {m['rows_per_s']:,.0f} | {ratio} | {m['cpu']:.2f} | "
                         f"{m['source_cpu']:.2f} / {m['sink_cpu']:.2f} / {m['run_cpu']:.2f} | {m['rss']:.0f} | "
                         + " ".join(f"{v:,.0f}" for v in m["rounds"]) + " |")
    lines.append("")
lines += ["![scaling](report/scaling.png)", ""]

os.makedirs(os.path.join(out_dir, "report"), exist_ok=True)
with open(os.path.join(out_dir, "report", "scaling.md"), "w") as f:
    f.write("\n".join(lines))

fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for label, rep in runs:
    for sc, by in table(rep).items():
        cores = sorted(by)
        rps = [by[n]["rows_per_s"] for n in cores]
        axes[0].plot(cores, rps, marker="o", label=f"{sc}, {label}")
        if 1 in by:
            axes[1].plot(cores, [v / by[1]["rows_per_s"] for v in rps], marker="o", label=f"{sc}, {label}")
allcores = sorted({r["cores"] for _, rep in runs for r in rep["runs"]})
axes[1].plot(allcores, allcores, color="gray", linestyle="--", linewidth=0.8, label="linear")
for ax, title in zip(axes, ["rows/s (median)", "ratio to one core"]):
    ax.set_xscale("log", base=2)
    ax.set_xticks(allcores, [str(c) for c in allcores])
    ax.minorticks_off()
    ax.set_xlabel("cores (taskset, all three processes)")
    ax.set_ylabel(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
fig.suptitle("One pipeline into Delta by cores", fontsize=10)
fig.tight_layout()
fig.savefig(os.path.join(out_dir, "report", "scaling.png"), dpi=90, bbox_inches="tight")
print(f"wrote {out_dir}/report/scaling.md and {out_dir}/report/scaling.png")
