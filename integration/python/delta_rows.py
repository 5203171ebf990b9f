"""Every row of a Delta table read with delta-rs, for a record-by-record
comparison: prints JSON {version, files, rows, digest}, the digest a
SHA-256 of the rows sorted by id, each row rendered as JSON.

usage: delta_rows.py URI [VERSION]
Storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be empty).
"""
import hashlib
import json
import os
import sys

from deltalake import DeltaTable

uri = sys.argv[1]
storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")
version = int(sys.argv[2]) if len(sys.argv) > 2 else None
dt = DeltaTable(uri, version=version, storage_options=storage or None)
t = dt.to_pyarrow_table().sort_by("id")
h = hashlib.sha256()
for row in t.to_pylist():
    h.update(json.dumps(row, default=str, sort_keys=True).encode())
    h.update(b"\n")
print(json.dumps({"version": dt.version(), "files": len(dt.file_uris()), "rows": t.num_rows, "digest": h.hexdigest()}))
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown: delta-rs' runtime aborts in it
