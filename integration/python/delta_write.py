"""delta-rs writes a Delta table (two appends) for Flightline's Delta
source to read back.

usage: delta_write.py URI N
Storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be empty).
"""
import json
import os
import sys

import pyarrow as pa
from deltalake import write_deltalake

uri, n = sys.argv[1], int(sys.argv[2])
storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")
if storage:
    storage["aws_conditional_put"] = "etag"


def batch(lo, hi):
    return pa.table({
        "id": pa.array(range(lo, hi), pa.int64()),
        "name": pa.array([f"py-{i}" if i % 5 else None for i in range(lo, hi)], pa.string()),
        "amount": pa.array([i / 4 for i in range(lo, hi)], pa.float64()),
        "ts": pa.array([1767225600000000 + i for i in range(lo, hi)], pa.timestamp("us", tz="UTC")),
    })


half = n // 2
write_deltalake(uri, batch(0, half), mode="append", storage_options=storage or None)
write_deltalake(uri, batch(half, n), mode="append", storage_options=storage or None)
print(json.dumps({"written": n}))
sys.stdout.flush()
os._exit(0)
