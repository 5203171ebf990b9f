"""Independent check of a Dir (or file) sink's output with pyarrow.dataset:
every id in [0, N) exactly once.

usage: verify_ids.py DIR N [FORMAT]   FORMAT: a pyarrow.dataset format
                                      (arrow, the default; parquet, json, csv)
"""
import json
import sys

import pyarrow.compute as pc
import pyarrow.dataset as ds

path, n = sys.argv[1], int(sys.argv[2])
fmt = sys.argv[3] if len(sys.argv) > 3 else "arrow"
t = ds.dataset(path, format=fmt).to_table(columns=["id"])
ids = t.column("id")
mm = pc.min_max(ids).as_py() if t.num_rows else {"min": None, "max": None}
out = {"rows": t.num_rows, "distinct": pc.count_distinct(ids).as_py(), "min": mm["min"], "max": mm["max"]}
print(json.dumps(out))
ok = out == {"rows": n, "distinct": n, "min": 0, "max": n - 1}
sys.exit(0 if ok else 1)
