"""Python transforms for the middle stage of a pipeline, served over
``DoExchange`` (docs/protocol.md, Transforms).

::

    from flightline.transform import polars_transform, serve_transform

    @polars_transform
    def big_orders(df):                      # a polars DataFrame in, one out
        return df.filter(df["quantity"] >= 5)

    server = serve_transform(big_orders, port=7403)   # blocks; port=0 picks one
    # flightline run … --transform grpc://127.0.0.1:7403, or
    # Pipeline(source, sink, transforms=["grpc://127.0.0.1:7403"])

The function sees one batch at a time and returns its rows; the server
answers every input with one output carrying the input's checkpoint,
unchanged and in order, even when no row is left, so the pipeline stays
exactly once. It keeps no state between batches: after a failure the
coordinator opens a new exchange and resends from the sink's checkpoint.
The output schema is the function's to choose but must stay the same for
the whole exchange.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Union

import pyarrow as pa
import pyarrow.flight as flight

__all__ = ["TransformServer", "serve_transform", "arrow_transform", "polars_transform"]

ArrowFn = Callable[[pa.RecordBatch], Union[pa.RecordBatch, pa.Table]]


def _as_batch(out: Any) -> pa.RecordBatch:
    if isinstance(out, pa.RecordBatch):
        return out
    if isinstance(out, pa.Table):
        return pa.record_batch([c.combine_chunks() for c in out.columns], schema=out.schema)
    raise pa.ArrowInvalid(f"a transform returns a pyarrow RecordBatch or Table, not {type(out).__name__}")


def arrow_transform(fn: ArrowFn) -> ArrowFn:
    """Mark fn (RecordBatch -> RecordBatch or Table) as a transform; the
    identity decorator, for symmetry with :func:`polars_transform`."""
    return fn


def polars_transform(fn: Callable[[Any], Any]) -> ArrowFn:
    """Wrap fn (polars DataFrame -> DataFrame) as a transform on Arrow
    batches. Needs ``flightline[polars]``."""
    import polars as pl

    def run(batch: pa.RecordBatch) -> pa.Table:
        df = pl.from_arrow(pa.Table.from_batches([batch]))
        return fn(df).to_arrow()

    run.__name__ = getattr(fn, "__name__", "polars_transform")
    run.__doc__ = fn.__doc__
    return run


class TransformServer(flight.FlightServerBase):
    """A ``DoExchange`` service applying ``fn`` to every input batch.

    An input without a checkpoint, a function that fails, or an output
    schema that changes fails the exchange with INVALID_ARGUMENT (the
    pipeline stops: the same input would fail again).
    """

    def __init__(self, fn: ArrowFn, location: str = "grpc://127.0.0.1:0", **kwargs: Any) -> None:
        super().__init__(location, **kwargs)
        self._fn = fn

    def do_exchange(self, context, descriptor, reader, writer):  # noqa: D102 (pyarrow's signature)
        schema: Optional[pa.Schema] = None
        for chunk in reader:
            if chunk.data is None:
                continue  # a metadata-only message carries no checkpoint to answer
            cp = chunk.app_metadata
            if cp is None or cp.size == 0:
                raise pa.ArrowInvalid("an input batch without a checkpoint")
            try:
                out = _as_batch(self._fn(chunk.data))
            except pa.ArrowException:
                raise
            except Exception as e:  # the function's error, named
                raise pa.ArrowInvalid(f"transform {getattr(self._fn, '__name__', 'fn')}: {type(e).__name__}: {e}") from e
            if schema is None:
                schema = out.schema
                writer.begin(schema)
            elif not out.schema.equals(schema):
                raise pa.ArrowInvalid(f"the transform's output schema changed: {out.schema} after {schema}")
            writer.write_with_metadata(out, cp)


def serve_transform(fn: ArrowFn, *, host: str = "127.0.0.1", port: int = 0, block: bool = True,
                    **kwargs: Any) -> TransformServer:
    """Serve fn as a transform on ``grpc://host:port`` (``port=0``: a free
    one, see ``server.port``). With ``block`` it serves until the process
    is stopped; otherwise it serves on a thread and returns the server
    (``server.shutdown()`` stops it)."""
    server = TransformServer(fn, f"grpc://{host}:{port}", **kwargs)
    if block:
        server.serve()
    else:
        threading.Thread(target=server.serve, daemon=True).start()
    return server
