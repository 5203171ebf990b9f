"""Every row of a Delta table read with delta-rs, for a row-by-row
comparison by a test: prints JSON {version, rows}, rows sorted by the
key column, each row a JSON object (values JSON can not hold as str).

usage: delta_table_rows.py URI [KEY]   (KEY defaults to id)
Storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be empty).
"""
import json
import os
import sys

from deltalake import DeltaTable

uri = sys.argv[1]
key = sys.argv[2] if len(sys.argv) > 2 else "id"
storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")
dt = DeltaTable(uri, storage_options=storage or None)
t = dt.to_pyarrow_table().sort_by(key)
print(json.dumps({"version": dt.version(), "rows": t.to_pylist()}, default=str))
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown: delta-rs' runtime aborts in it
