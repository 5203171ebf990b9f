"""Independent check of the ClickHouse sink's output, read with chdb
directly from the data directory of a stopped chdb front (no HTTP, no
Flightline code): every id in [0, N) exactly once in TABLE.

usage: verify_chdb_ids.py DATA_DIR TABLE N
"""
import json
import sys

from chdb import session

path, table, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = session.Session(path)
r = s.query(f"SELECT count(), uniqExact(id), min(id), max(id) FROM {table} FORMAT JSONCompact")
row = json.loads(r.bytes())["data"][0]
out = {"rows": int(row[0]), "distinct": int(row[1]), "min": int(row[2]), "max": int(row[3])}
print(json.dumps(out))
sys.exit(0 if out == {"rows": n, "distinct": n, "min": 0, "max": n - 1} else 1)
