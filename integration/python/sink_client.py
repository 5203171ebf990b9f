"""Interop: a plain pyarrow.flight client pushes batches into a Flightline
sink, written from docs/protocol.md alone.

usage: sink_client.py URL PIPELINE TOKEN
Exits non-zero on any contract violation; prints a JSON summary.
"""
import json
import sys

import pyarrow as pa
import pyarrow.flight as flight

url, pipeline, token = sys.argv[1:4]
opts = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {token}".encode())])
client = flight.FlightClient(url)
schema = pa.schema([("id", pa.int64()), ("name", pa.string())])


def cp_bytes(nxt):
    return json.dumps({"positions": {"py/0": nxt}}, separators=(",", ":")).encode()


def last_checkpoint():
    body = json.dumps({"pipeline_id": pipeline, "target": "py"}).encode()
    results = list(client.do_action(flight.Action("checkpoint", body), options=opts))
    assert len(results) <= 1, results
    return results[0].body.to_pybytes() if results else None


def batch(first, n):
    return pa.record_batch([pa.array(range(first, first + n), pa.int64()),
                            pa.array([f"n{i}" for i in range(first, first + n)])], schema=schema)


def push(start, end, step, pipelined):
    desc = flight.FlightDescriptor.for_path(pipeline, "py")
    writer, acks = client.do_put(desc, schema, options=opts)
    sent = []
    for first in range(start, end, step):
        cp = cp_bytes(first + step)
        writer.write_with_metadata(batch(first, step), pa.py_buffer(cp))
        sent.append(cp)
        if not pipelined:
            ack = acks.read()
            assert ack is not None and ack.to_pybytes() == cp, (ack, cp)
    if pipelined:  # acks arrive in order, one per batch
        for cp in sent:
            ack = acks.read()
            assert ack is not None and ack.to_pybytes() == cp, (ack, cp)
    writer.done_writing()
    writer.close()
    return len(sent)


summary = {}
assert last_checkpoint() is None, "fresh pipeline must have no checkpoint"
summary["batches_1"] = push(0, 300, 100, pipelined=False)
assert last_checkpoint() == cp_bytes(300)

# Resume from the checkpoint as the protocol says, pipelining acks.
start = json.loads(last_checkpoint())["positions"]["py/0"]
summary["batches_2"] = push(start, start + 500, 50, pipelined=True)
assert last_checkpoint() == cp_bytes(800)

# A replay of a committed batch is acknowledged and writes nothing.
summary["replay"] = push(700, 800, 100, pipelined=False)

# describe tells the guarantee.
d = list(client.do_action(flight.Action("describe", b""), options=opts))
summary["guarantee"] = json.loads(d[0].body.to_pybytes())["guarantee"]

# A batch without a checkpoint is INVALID_ARGUMENT and commits nothing.
writer, acks = client.do_put(flight.FlightDescriptor.for_path(pipeline, "py"), schema, options=opts)
try:
    writer.write_batch(batch(800, 10))
    acks.read()
    writer.done_writing()
    writer.close()
    raise SystemExit("a batch without app_metadata was accepted")
except flight.FlightError as e:
    summary["no_metadata_error"] = type(e).__name__
except pa.ArrowInvalid as e:
    summary["no_metadata_error"] = "ArrowInvalid"
assert last_checkpoint() == cp_bytes(800)

# A wrong token is UNAUTHENTICATED.
try:
    list(client.do_action(flight.Action("checkpoint", json.dumps({"pipeline_id": pipeline}).encode()),
                          options=flight.FlightCallOptions(headers=[(b"authorization", b"Bearer wrong")])))
    raise SystemExit("a wrong token was accepted")
except flight.FlightUnauthenticatedError:
    summary["wrong_token"] = "FlightUnauthenticatedError"

print(json.dumps(summary))
