"""Reads an Iceberg table through pyiceberg's SqlCatalog (the independent
reader of the Iceberg sink's tests) and writes it, sorted by id, as an
Arrow IPC file, with the snapshot summaries' flightline keys as JSON.

usage: read_pyiceberg.py CATALOG_DB CATALOG_NAME WAREHOUSE TABLE OUT.arrow OUT.json
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

db, name, warehouse, ident, out, out_json = sys.argv[1:7]
cat = SqlCatalog(name, uri="sqlite:///" + db, warehouse=warehouse)
tbl = cat.load_table(ident)
data = tbl.scan().to_arrow().sort_by("id")
with pa.OSFile(out, "wb") as f:
    with pa.ipc.new_file(f, data.schema) as w:
        w.write_table(data)
snap = tbl.current_snapshot()
summary = {k: v for k, v in snap.summary.additional_properties.items() if k.startswith("flightline.")} if snap else {}
with open(out_json, "w") as f:
    json.dump({"snapshots": len(tbl.snapshots()), "summary": summary}, f)
