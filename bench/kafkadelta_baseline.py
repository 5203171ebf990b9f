"""Python baseline for the Kafka (JSON orders) → Delta benchmark: what a
Python pipeline does for the same job. A confluent-kafka consumer reads every
partition of the topic from the beginning (assigned, no group join); each batch of BATCH records is json-decoded,
built into a pyarrow table of the same columns Flightline writes
(partition, offset, timestamp, key, the order's fields) and appended with
deltalake.write_deltalake, one Delta commit per batch.

MODE json (the default) decodes each record with json.loads, as a first
Python pipeline would; MODE vectorised decodes each batch's values at once
with pyarrow.json.read_json (C++, multi-threaded) and builds the Kafka
columns with one list comprehension each, as a Python user who cares about
speed would.

usage: kafkadelta_baseline.py BROKERS TOPIC N TABLE BATCH [json|vectorised]
Prints one JSON line: rows, value bytes, wall seconds, CPU seconds (this
process, librdkafka's threads included).
"""
import io
import json
import os
import resource
import sys
import time
import uuid

import pyarrow as pa
import pyarrow.json as pajson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from deltalake import write_deltalake

brokers, topic, n, table, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
mode = sys.argv[6] if len(sys.argv) > 6 else "json"

schema = pa.schema([
    ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")),
    ("key", pa.binary()),
    ("order_id", pa.int64()), ("customer", pa.string()), ("item", pa.string()),
    ("quantity", pa.int32()), ("price", pa.float64()), ("created_at", pa.timestamp("ms", tz="UTC")),
])
fields = ["order_id", "customer", "item", "quantity", "price", "created_at"]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


c = Consumer({
    "bootstrap.servers": brokers,
    "group.id": "py-baseline-" + uuid.uuid4().hex,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
})
t0, c0 = time.perf_counter(), cpu()
# Assign every partition from the beginning: no group join, as the Go side
# (WithoutGroupMembership).
parts = c.list_topics(topic, timeout=10).topics[topic].partitions
c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
# created_at is epoch milliseconds: read as int64, then cast.
value_schema = pa.schema([
    ("order_id", pa.int64()), ("customer", pa.string()), ("item", pa.string()),
    ("quantity", pa.int32()), ("price", pa.float64()), ("created_at", pa.int64()),
])
parse = pajson.ParseOptions(explicit_schema=value_schema, unexpected_field_behavior="ignore")


def vectorised(msgs):
    global nbytes
    values = [m.value() for m in msgs]
    for m in msgs:
        if m.error():
            raise SystemExit(f"consume: {m.error()}")
    buf = b"\n".join(values)
    nbytes += len(buf) - len(values) + 1
    v = pajson.read_json(io.BytesIO(buf), parse_options=parse)
    cols = [
        pa.array([m.partition() for m in msgs], pa.int32()),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array([m.timestamp()[1] for m in msgs], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        pa.array([m.key() for m in msgs], pa.binary()),
    ]
    for f in fields:
        c = v.column(f)
        if f == "created_at":
            c = c.cast(pa.timestamp("ms", tz="UTC"))
        cols.append(c)
    return pa.Table.from_arrays(cols, schema=schema)


rows = nbytes = 0
while rows < n:
    if mode == "vectorised":
        msgs = []
        while len(msgs) < min(batch, n - rows):
            msgs += c.consume(num_messages=min(batch, n - rows) - len(msgs), timeout=1.0)
        t = vectorised(msgs)
        write_deltalake(table, t, mode="append")
        rows += t.num_rows
        continue
    cols = {k: [] for k in schema.names}
    while len(cols["offset"]) < min(batch, n - rows):
        msgs = c.consume(num_messages=min(batch, n - rows) - len(cols["offset"]), timeout=1.0)
        for m in msgs:
            if m.error():
                raise SystemExit(f"consume: {m.error()}")
            v = m.value()
            nbytes += len(v)
            o = json.loads(v)
            cols["partition"].append(m.partition())
            cols["offset"].append(m.offset())
            cols["timestamp"].append(m.timestamp()[1])
            cols["key"].append(m.key())
            for f in fields:
                cols[f].append(o.get(f))
    t = pa.Table.from_pydict(cols, schema=schema)
    write_deltalake(table, t, mode="append")
    rows += t.num_rows
wall, cpus = time.perf_counter() - t0, cpu() - c0
c.close()
print(json.dumps({"rows": rows, "bytes": nbytes, "seconds": wall, "cpu_seconds": cpus}))
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown: delta-rs' runtime may abort in it
