"""Reads an Iceberg table through pyiceberg's GlueCatalog on moto (the
independent reader of the Iceberg sink's Glue tests): prints its ids, its
snapshot count and the current snapshot's flightline summary keys as JSON.

usage: read_pyiceberg_glue.py ENDPOINT TABLE
"""
import json
import sys

from pyiceberg.catalog.glue import GlueCatalog

endpoint, ident = sys.argv[1:3]
creds = {"region_name": "us-east-1", "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
cat = GlueCatalog("glue", **{
    "glue.endpoint": endpoint, "glue.region": "us-east-1",
    "glue.access-key-id": "testing", "glue.secret-access-key": "testing",
    "s3.endpoint": endpoint, "s3.region": "us-east-1",
    "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
})
tbl = cat.load_table(ident)
snap = tbl.current_snapshot()
summary = {k: v for k, v in snap.summary.additional_properties.items() if k.startswith("flightline.")} if snap else {}
ids = sorted(tbl.scan().to_arrow().column("id").to_pylist())
print(json.dumps({"ids": ids, "snapshots": len(tbl.snapshots()), "summary": summary}))
