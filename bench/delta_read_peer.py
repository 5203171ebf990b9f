"""Full-table reads of a Delta table with delta-rs, timed from inside (after
the imports): prints JSON {rows, files, seconds} for reps reads.

usage: delta_read_peer.py URI REPS
"""
import json
import sys
import time

from deltalake import DeltaTable

uri, reps = sys.argv[1], int(sys.argv[2])
rows = files = 0
t0 = time.perf_counter()
for _ in range(reps):
    dt = DeltaTable(uri)
    files = len(dt.file_uris())
    rows += dt.to_pyarrow_table().num_rows
el = time.perf_counter() - t0
print(json.dumps({"rows": rows, "files": files, "seconds": el}))
sys.stdout.flush()
import os
os._exit(0)  # skip interpreter teardown: delta-rs' runtime aborts in it
