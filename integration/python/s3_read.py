"""Independent reader of an S3 sink's output, with pyarrow's own S3 client.

usage: s3_read.py BUCKET/DIR [COLUMN]

Reads the server from FLIGHTLINE_S3_ENDPOINT, FLIGHTLINE_S3_ACCESS_KEY and
FLIGHTLINE_S3_SECRET_KEY. Prints one JSON document:

  objects: per Parquet object under DIR (readers' view: names starting with
           '_' or '.' skipped): name, rows, row groups, the compression of
           every column chunk, and the Arrow schema as [name, type, nullable]
  dataset: the whole DIR read as one pyarrow.dataset: rows and schema
  values:  the COLUMN of the dataset as a list (if COLUMN is given; binary
           values decoded as UTF-8)
  common_metadata: the schema in DIR/_common_metadata, if present
"""
import json
import os
import sys
from urllib.parse import urlparse

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

endpoint = urlparse(os.environ["FLIGHTLINE_S3_ENDPOINT"])
fs = pafs.S3FileSystem(
    access_key=os.environ["FLIGHTLINE_S3_ACCESS_KEY"],
    secret_key=os.environ["FLIGHTLINE_S3_SECRET_KEY"],
    endpoint_override=endpoint.netloc,
    scheme=endpoint.scheme,
    region=os.environ.get("FLIGHTLINE_S3_REGION", "us-east-1"),
)
path = sys.argv[1].strip("/")
column = sys.argv[2] if len(sys.argv) > 2 else None


def fields(schema):
    return [[f.name, str(f.type), f.nullable] for f in schema]


out = {"objects": [], "common_metadata": None}
for info in fs.get_file_info(pafs.FileSelector(path, recursive=False)):
    name = info.base_name
    if info.type != pafs.FileType.File:
        continue
    if name == "_common_metadata":
        out["common_metadata"] = fields(pq.read_schema(info.path, filesystem=fs))
        continue
    if name.startswith(("_", ".")):
        continue
    f = pq.ParquetFile(info.path, filesystem=fs)
    md = f.metadata
    codecs = sorted({md.row_group(g).column(c).compression
                     for g in range(md.num_row_groups) for c in range(md.num_columns)})
    out["objects"].append({"name": name, "rows": md.num_rows, "row_groups": md.num_row_groups,
                           "codecs": codecs, "schema": fields(f.schema_arrow)})

dataset = ds.dataset(path, format="parquet", filesystem=fs)
table = dataset.to_table()
out["dataset"] = {"rows": table.num_rows, "schema": fields(dataset.schema)}
if column:
    vals = table.column(column).to_pylist()
    out["values"] = [v.decode() if isinstance(v, bytes) else v for v in vals]
print(json.dumps(out))
