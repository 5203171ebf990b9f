"""pyiceberg's own append, the Iceberg sink's benchmark peer: reads an Arrow
IPC file of batches, creates a table in a fresh SqlCatalog (SQLite) and
appends each batch as one snapshot with a checkpoint in its summary, N
rounds; prints rows, the process's CPU seconds spent in the appends
(time.process_time, which counts every thread of the process) and their
wall seconds. Its imports and the catalog's set-up are not counted, as
the sink's set-up is not.

usage: iceberg_pyiceberg.py IN.arrow DIR ROUNDS
"""
import os
import sys
import time

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

src, d, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
with pa.memory_map(src) as f:
    r = pa.ipc.open_file(f)
    batches = [r.get_batch(i) for i in range(r.num_record_batches)]
os.makedirs(d, exist_ok=True)
cat = SqlCatalog("bench", uri=f"sqlite:///{d}/catalog.db", warehouse=f"file://{d}")
cat.create_namespace("bench")
rows, cpu, wall = 0, 0.0, 0.0
for r in range(rounds):
    tbl = cat.create_table(f"bench.t{r}", schema=batches[0].schema)
    for b in batches:
        t = pa.Table.from_batches([b])
        c0, w0 = time.process_time(), time.perf_counter()
        tbl.append(t, snapshot_properties={"flightline.checkpoint.bench": str(rows)})
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        rows += b.num_rows
print(rows, cpu, wall)
sys.stdout.flush()
os._exit(0)
