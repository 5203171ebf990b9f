"""Interop: a plain pyarrow.flight client drives a Flightline transform
service over DoExchange, written from docs/protocol.md alone.

usage: transform_client.py URL TOKEN
Exits non-zero on any contract violation; prints a JSON summary.
"""
import json
import sys

import pyarrow as pa
import pyarrow.flight as flight

url, token = sys.argv[1:3]
opts = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())])
client = flight.FlightClient(url)
schema = pa.schema([("id", pa.int64()), ("quantity", pa.int32())])
desc = flight.FlightDescriptor.for_command(json.dumps({"pipeline_id": "py", "stream": "s"}).encode())


def cp(n):
    return json.dumps({"positions": {"py/0": n}}, separators=(",", ":")).encode()


def batch(first, n):
    return pa.record_batch([pa.array(range(first, first + n), pa.int64()),
                            pa.array([1 + i % 9 for i in range(first, first + n)], pa.int32())], schema=schema)


out = {}
writer, reader = client.do_exchange(desc, options=opts)
writer.begin(schema)
sent = []
for first in range(0, 300, 100):
    writer.write_with_metadata(batch(first, 100), pa.py_buffer(cp(first + 100)))
    sent.append(cp(first + 100))
writer.write_with_metadata(batch(300, 0), pa.py_buffer(cp(301)))  # 0 rows, a new checkpoint
sent.append(cp(301))
writer.done_writing()
got, rows = [], 0
for chunk in reader:
    got.append(chunk.app_metadata.to_pybytes())
    rows += chunk.data.num_rows
    out["schema"] = chunk.data.schema.names
assert got == sent, (got, sent)  # one answer per input, in order, checkpoints unchanged
writer.close()
out["answers"] = len(got)
out["rows"] = rows

# A batch without a checkpoint is refused.
writer, reader = client.do_exchange(desc, options=opts)
writer.begin(schema)
writer.write_batch(batch(0, 10))
writer.done_writing()
try:
    reader.read_all()
    out["no_metadata_error"] = None
except Exception as e:  # noqa: BLE001
    out["no_metadata_error"] = type(e).__name__

# A wrong token is refused.
try:
    w, r = client.do_exchange(desc, options=flight.FlightCallOptions(headers=[(b"authorization", b"Bearer nope")]))
    w.begin(schema)
    w.write_with_metadata(batch(0, 1), pa.py_buffer(cp(1)))
    w.done_writing()
    r.read_all()
    out["wrong_token"] = None
except Exception as e:  # noqa: BLE001
    out["wrong_token"] = type(e).__name__
print(json.dumps(out))
