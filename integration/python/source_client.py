"""Interop: a plain pyarrow.flight client reads a Flightline source with
DoGet from a resume checkpoint, written from docs/protocol.md alone.

usage: source_client.py URL
"""
import base64
import json
import sys

import pyarrow as pa
import pyarrow.flight as flight

client = flight.FlightClient(sys.argv[1])
summary = {}

infos = list(client.list_flights())
summary["streams"] = [info.descriptor.path[0].decode() for info in infos]
info = client.get_flight_info(flight.FlightDescriptor.for_path("orders"))
schema = client.get_schema(flight.FlightDescriptor.for_path("orders")).schema
assert schema == info.schema, (schema, info.schema)
summary["schema"] = schema.names

# The endpoint's own ticket reads from the start.
reader = client.do_get(info.endpoints[0].ticket)
first = next(iter(reader))
assert first.data.column("id")[0].as_py() == 0
reader.cancel()

# Resume after a checkpoint: the first id is the checkpoint's position.
cp = b'{"positions":{"orders/0":5000}}'
ticket = flight.Ticket(json.dumps({"stream": "orders", "pipeline_id": "py",
                                   "checkpoint": base64.b64encode(cp).decode()}).encode())
reader = client.do_get(ticket)
expect, rows, last_cp = 5000, 0, None
for chunk in reader:
    if chunk.data.num_rows == 0:
        continue  # heartbeat
    ids = chunk.data.column("id").to_pylist()
    assert ids == list(range(expect, expect + len(ids))), (ids[:3], expect)
    expect += len(ids)
    rows += len(ids)
    last_cp = json.loads(chunk.app_metadata.to_pybytes())
    assert last_cp == {"positions": {"orders/0": expect}}, last_cp
summary["rows"] = rows
summary["last_checkpoint"] = last_cp

# An unknown stream is NOT_FOUND (pyarrow: FlightServerError or KeyError-like).
try:
    client.get_schema(flight.FlightDescriptor.for_path("nope"))
    raise SystemExit("unknown stream accepted")
except flight.FlightError as e:
    summary["unknown_stream"] = type(e).__name__
except KeyError:
    summary["unknown_stream"] = "KeyError"

# A malformed ticket is INVALID_ARGUMENT.
try:
    r = client.do_get(flight.Ticket(b"not json"))
    r.read_all()
    raise SystemExit("malformed ticket accepted")
except (flight.FlightError, pa.ArrowInvalid) as e:
    summary["bad_ticket"] = type(e).__name__

print(json.dumps(summary))
