"""Independent check of a Delta table with delta-rs (the `deltalake`
package): rows, ids exactly once, schema, commit history and txn.

usage: delta_check.py URI [PIPELINE APP_ID]
Storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be empty);
FLIGHTLINE_DELTA_ID names the id column (default id).
Prints a JSON summary; the Go test asserts on it.
"""
import json
import os
import sys

import pyarrow.compute as pc
from deltalake import DeltaTable

uri = sys.argv[1]
pipeline = sys.argv[2] if len(sys.argv) > 2 else None
app_id = sys.argv[3] if len(sys.argv) > 3 else None
storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")

dt = DeltaTable(uri, storage_options=storage or None)
t = dt.to_pyarrow_table()
id_col = os.environ.get("FLIGHTLINE_DELTA_ID") or "id"
ids = t.column(id_col)
out = {
    "version": dt.version(),
    "rows": t.num_rows,
    "distinct": pc.count_distinct(ids).as_py() if t.num_rows else 0,
    "min": pc.min(ids).as_py() if t.num_rows else None,
    "max": pc.max(ids).as_py() if t.num_rows else None,
    "schema": {f.name: str(f.type) for f in t.schema},
    "protocol": [dt.protocol().min_reader_version, dt.protocol().min_writer_version],
}
if pipeline:
    hist = dt.history()
    ours = [h for h in hist if (h.get("flightline") or {}).get("pipeline_id") == pipeline]
    out["history"] = len(hist)
    out["our_commits"] = len(ours)
    last = max(ours, key=lambda h: h["version"]) if ours else None
    out["last_checkpoint"] = ((last or {}).get("flightline") or {}).get("checkpoint", {}).get(pipeline)
    out["operations"] = sorted({h.get("operation") for h in hist})
if app_id:
    out["txn"] = dt.transaction_version(app_id)
if os.environ.get("FLIGHTLINE_DELTA_ROWS"):
    out["sample"] = json.loads(json.dumps(t.sort_by(id_col).slice(0, 2).to_pylist(), default=str))
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown: delta-rs' runtime aborts in it
