"""A Flightline transform service written with pyarrow.flight alone.

It follows the DoExchange contract of docs/protocol.md: for every input
batch it sends exactly one output batch carrying the input's checkpoint
(its app_metadata) unchanged, in order, even when the filter drops every
row. It keeps the orders whose quantity is at least --min-quantity and adds
a column total = amount * quantity computed with pyarrow.compute.

    python transform.py --port 7403 [--min-quantity 5] [--identity]

--identity passes batches through untouched (for benchmarks). The service
keeps no state between exchanges, so it can be killed and restarted at any
time: the coordinator resends from the sink's checkpoint.
"""
import argparse
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight


def output_schema(schema):
    return schema.append(pa.field("total", pa.float64()))


def transform(batch, min_quantity):
    kept = batch.filter(pc.greater_equal(batch.column("quantity"), min_quantity))
    total = pc.multiply(kept.column("amount"), pc.cast(kept.column("quantity"), pa.float64()))
    return pa.RecordBatch.from_arrays(kept.columns + [total], schema=output_schema(batch.schema))


class Transform(flight.FlightServerBase):
    def __init__(self, location, min_quantity, identity, **kwargs):
        super().__init__(location, **kwargs)
        self.min_quantity = min_quantity
        self.identity = identity

    def do_exchange(self, context, descriptor, reader, writer):
        try:
            schema = reader.schema  # the client sends it first
        except (StopIteration, pa.ArrowInvalid):
            return  # no input, no output
        if self.identity:
            writer.begin(schema)
        else:
            for name in ("amount", "quantity"):
                if schema.get_field_index(name) < 0:
                    # INVALID_ARGUMENT: the pipeline stops (docs/protocol.md)
                    raise flight.FlightServerError(f"input has no column {name!r}")
            writer.begin(output_schema(schema))
        for chunk in reader:
            if chunk.data is None:
                continue  # metadata-only messages carry no checkpoint to answer
            out = chunk.data if self.identity else transform(chunk.data, self.min_quantity)
            # The checkpoint goes back as it came: never invented, never reordered.
            writer.write_with_metadata(out, chunk.app_metadata)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7403, help="0 picks a free port")
    ap.add_argument("--min-quantity", type=int, default=5)
    ap.add_argument("--identity", action="store_true")
    args = ap.parse_args()
    server = Transform(f"grpc://{args.host}:{args.port}", args.min_quantity, args.identity)
    print(f"listening on {args.host}:{server.port}", flush=True)
    server.serve()


if __name__ == "__main__":
    sys.exit(main())
