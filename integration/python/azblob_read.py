"""Independent reader of an azblob sink's output, with Microsoft's own
azure-storage-blob client and pyarrow.dataset.

usage: azblob_read.py CONTAINER PREFIX

Reads the service from FLIGHTLINE_AZURITE_ENDPOINT (the service URL, e.g.
http://127.0.0.1:10000/devstoreaccount1), FLIGHTLINE_AZURITE_ACCOUNT and
FLIGHTLINE_AZURITE_KEY. Lists every blob under PREFIX/, skips those with a
path component starting with '_' or '.' (what dataset readers skip),
downloads the rest into a temporary directory with their relative paths,
and reads it as one Hive-partitioned Parquet dataset. Prints one JSON
document:

  files:  the relative names read
  rows:   the dataset's row count
  schema: [name, type, nullable] of the dataset
  ids:    the int64 "id" column as a list
"""
import json
import os
import sys
import tempfile

import pyarrow.dataset as ds
from azure.storage.blob import BlobServiceClient

service = BlobServiceClient(
    account_url=os.environ["FLIGHTLINE_AZURITE_ENDPOINT"],
    credential={"account_name": os.environ["FLIGHTLINE_AZURITE_ACCOUNT"],
                "account_key": os.environ["FLIGHTLINE_AZURITE_KEY"]},
)
container = service.get_container_client(sys.argv[1])
prefix = sys.argv[2].strip("/") + "/"

with tempfile.TemporaryDirectory() as tmp:
    files = []
    for blob in container.list_blobs(name_starts_with=prefix):
        rel = blob.name[len(prefix):]
        if any(c.startswith(("_", ".")) for c in rel.split("/")):
            continue
        dest = os.path.join(tmp, *rel.split("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(container.download_blob(blob.name).readall())
        files.append(rel)
    out = {"files": sorted(files), "rows": 0, "schema": [], "ids": []}
    if files:
        dataset = ds.dataset(tmp, format="parquet", partitioning="hive")
        table = dataset.to_table()
        out["rows"] = table.num_rows
        out["schema"] = [[f.name, str(f.type), f.nullable] for f in dataset.schema]
        out["ids"] = table.column("id").to_pylist()
json.dump(out, sys.stdout)
