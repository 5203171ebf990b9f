"""A Flightline transform service with polars, over pyarrow.flight.

Same job as ../python/transform.py — keep the orders whose quantity is at
least --min-quantity and add total = amount * quantity — written as a
polars expression. It also shows the contract's splitting rule
(docs/protocol.md): with --max-rows N it answers an input with pieces of at
most N rows; every piece but the last goes out without app_metadata, and
the last carries the input's checkpoint. The coordinator joins the pieces
and commits them with that checkpoint.

    python transform.py --port 7404 [--min-quantity 5] [--max-rows 0]
"""
import argparse
import sys

import polars as pl
import pyarrow as pa
import pyarrow.flight as flight


class Transform(flight.FlightServerBase):
    def __init__(self, location, min_quantity, max_rows, **kwargs):
        super().__init__(location, **kwargs)
        self.min_quantity = min_quantity
        self.max_rows = max_rows

    def rewrite(self, batch):
        df = pl.from_arrow(batch)
        if not isinstance(df, pl.DataFrame):  # a 0-column batch
            df = pl.DataFrame(df)
        out = df.filter(pl.col("quantity") >= self.min_quantity).with_columns(
            (pl.col("amount") * pl.col("quantity").cast(pl.Float64)).alias("total"))
        return out.to_arrow().combine_chunks()

    def do_exchange(self, context, descriptor, reader, writer):
        schema = None
        for chunk in reader:
            if chunk.data is None:
                continue
            table = self.rewrite(chunk.data)
            if schema is None:
                schema = table.schema  # fixed for the whole exchange
                writer.begin(schema)
            table = table.cast(schema)
            n = self.max_rows or max(table.num_rows, 1)
            pieces = [table.slice(i, n) for i in range(0, table.num_rows, n)] or [table]
            for piece in pieces[:-1]:
                for b in piece.to_batches():
                    writer.write_batch(b)  # no checkpoint: not the end of the input
            last = pieces[-1].combine_chunks().to_batches() or [pa.RecordBatch.from_pylist([], schema=schema)]
            for b in last[:-1]:
                writer.write_batch(b)
            writer.write_with_metadata(last[-1], chunk.app_metadata)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7404, help="0 picks a free port")
    ap.add_argument("--min-quantity", type=int, default=5)
    ap.add_argument("--max-rows", type=int, default=0, help="split outputs into pieces of at most this many rows")
    args = ap.parse_args()
    server = Transform(f"grpc://{args.host}:{args.port}", args.min_quantity, args.max_rows)
    print(f"listening on {args.host}:{server.port}", flush=True)
    server.serve()


if __name__ == "__main__":
    sys.exit(main())
