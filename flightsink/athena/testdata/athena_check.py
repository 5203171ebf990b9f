"""Reads an athena sink's table back without Flightline: the Glue table and
its partitions with boto3, the Parquet files under the table's LOCATION
with pyarrow (every object there, no name skipped, as Athena reads them).

usage: athena_check.py ENDPOINT DATABASE TABLE
Prints one JSON object."""
import json
import sys

import boto3
import pyarrow.dataset as ds
import pyarrow.fs as pafs

endpoint, database, table = sys.argv[1:4]
kw = dict(endpoint_url=endpoint, region_name="us-east-1",
          aws_access_key_id="testing", aws_secret_access_key="testing")
glue = boto3.client("glue", **kw)
t = glue.get_table(DatabaseName=database, Name=table)["Table"]
sd = t["StorageDescriptor"]
parts = []
for page in glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=table):
    for p in page["Partitions"]:
        parts.append({"values": p["Values"], "location": p["StorageDescriptor"]["Location"]})
parts.sort(key=lambda p: p["values"])

location = sd["Location"]
bucket, _, prefix = location[len("s3://"):].partition("/")
s3 = boto3.client("s3", **kw)
keys = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    keys += [o["Key"][len(prefix):] for o in page.get("Contents", [])]

fs = pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing", secret_key="testing",
                       region="us-east-1", scheme="http")
# ignore_prefixes=[]: read every object under LOCATION, as Athena does.
data = ds.dataset(bucket + "/" + prefix, filesystem=fs, format="parquet", partitioning="hive",
                  ignore_prefixes=[])
ids = data.to_table(columns=["id"]).column("id").to_pylist()

print(json.dumps({
    "columns": [[c["Name"], c["Type"]] for c in sd["Columns"]],
    "partition_keys": [[c["Name"], c["Type"]] for c in t.get("PartitionKeys", [])],
    "parameters": t.get("Parameters", {}),
    "serde": sd["SerdeInfo"]["SerializationLibrary"],
    "location": location,
    "partitions": parts,
    "objects": sorted(keys),
    "ids": ids,
}))
