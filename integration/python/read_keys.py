"""Independent reader for the kill tests: prints the COLUMN of every row a
sink committed, one value per line (binary values decoded as UTF-8), so the
Go test can check the records one by one.

usage: read_keys.py delta URI COLUMN   a Delta table, read with delta-rs
       read_keys.py arrow DIR COLUMN   a Dir sink's target directory, read
                                       with pyarrow.dataset (format arrow)
       read_keys.py parquet DIR COLUMN a file sink's target directory, read
                                       with pyarrow.dataset (format parquet)

Delta storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be
empty). A missing table or directory prints nothing.
"""
import json
import os
import sys

kind, uri, column = sys.argv[1], sys.argv[2], sys.argv[3]

if kind == "delta":
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")
    try:
        t = DeltaTable(uri, storage_options=storage or None).to_pyarrow_table(columns=[column])
    except TableNotFoundError:
        t = None
elif kind in ("arrow", "parquet"):
    import pyarrow.dataset as ds

    t = ds.dataset(uri, format=kind).to_table(columns=[column]) if os.path.isdir(uri) else None
else:
    sys.exit(f"read_keys.py: unknown kind {kind!r}")

out = sys.stdout
if t is not None:
    for v in t.column(column).to_pylist():
        if isinstance(v, (bytes, bytearray)):
            v = v.decode()
        out.write(f"{v}\n")
out.flush()
# Leave without the interpreter's teardown: under load, the C++ thread
# pools of pyarrow/deltalake have aborted the process at exit ("terminate
# called without an active exception", SIGABRT) after the output was
# complete.
os._exit(0)
