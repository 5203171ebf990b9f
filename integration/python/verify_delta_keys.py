"""Independent check of a Delta table with delta-rs (the `deltalake`
package): column COLUMN holds every key of [0, N) exactly once. Integer
keys by default; with PREFIX the keys are the strings (or bytes)
PREFIX0 .. PREFIX(N-1).

usage: verify_delta_keys.py URI COLUMN N [PREFIX]
Storage options come as JSON in FLIGHTLINE_DELTA_STORAGE (may be empty).
Prints a JSON summary and exits 1 when a key is missing or duplicated.
"""
import collections
import json
import os
import sys

from deltalake import DeltaTable

uri, column, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
prefix = sys.argv[4] if len(sys.argv) > 4 else None
storage = json.loads(os.environ.get("FLIGHTLINE_DELTA_STORAGE") or "{}")

dt = DeltaTable(uri, storage_options=storage or None)
t = dt.to_pyarrow_table(columns=[column])
keys = t.column(column).to_pylist()
if prefix is not None:
    keys = [k.decode() if isinstance(k, (bytes, bytearray)) else k for k in keys]
    want = {f"{prefix}{i}" for i in range(n)}
else:
    want = set(range(n))
counts = collections.Counter(keys)
dups = [k for k, c in counts.items() if c > 1]
missing = want - counts.keys()
extra = counts.keys() - want
out = {"version": dt.version(), "rows": t.num_rows, "distinct": len(counts),
       "duplicated": len(dups), "missing": len(missing), "unexpected": len(extra),
       "examples": [str(x) for x in (dups[:3] + sorted(missing, key=str)[:3] + sorted(extra, key=str)[:3])]}
print(json.dumps(out))
sys.stdout.flush()
os._exit(0 if t.num_rows == n and not dups and not missing and not extra else 1)
