"""Reads an Iceberg table through pyiceberg's RestCatalog (the independent
reader of the Iceberg sink's REST-catalog tests): prints its ids, its
snapshot count and the current snapshot's flightline summary keys as JSON.

usage: read_pyiceberg_rest.py URI TABLE
"""
import json
import sys

from pyiceberg.catalog.rest import RestCatalog

uri, ident = sys.argv[1:3]
cat = RestCatalog("rest", uri=uri)
tbl = cat.load_table(ident)
snap = tbl.current_snapshot()
summary = {k: v for k, v in snap.summary.additional_properties.items() if k.startswith("flightline.")} if snap else {}
ids = sorted(tbl.scan().to_arrow().column("id").to_pylist())
print(json.dumps({"ids": ids, "snapshots": len(tbl.snapshots()), "location": tbl.location(), "summary": summary}))
