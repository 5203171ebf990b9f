"""An exactly-once client for Flightline endpoints, over ``pyarrow.flight``.

It implements docs/protocol.md (version 1):

* :class:`Sink` pushes batches into a sink's ``DoPut`` endpoint. Each batch
  carries its checkpoint; the sink commits rows and checkpoint atomically
  and acknowledges them in order. The client keeps at most ``window``
  batches unacknowledged, checks every acknowledgement against the
  checkpoint it sent, and opens the stream with ``resume_after`` set to the
  checkpoint it read, so a stale writer fails (``CheckpointMoved``) instead
  of appending after a checkpoint it never saw.
* :class:`Source` reads a source's stream after a checkpoint, yielding
  ``(batch, checkpoint)``.

Errors are the exceptions of :mod:`flightline.errors`, one per gRPC code.

Example::

    sink = Sink("grpc://127.0.0.1:7402", pipeline_id="orders-from-python")
    result = sink.write_table(table)       # resumes where the last run stopped
"""

from __future__ import annotations

import base64
import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.flight as flight

from .errors import AckMismatch, FlightlineError, InvalidArgument, from_flight_error

__all__ = ["Sink", "Source", "WriteResult", "positions", "parse_positions"]

Checkpoint = Union[bytes, str]


def positions(pos: dict) -> bytes:
    """The mergeable checkpoint ``{"positions": pos}`` in its canonical
    form (keys in byte order, no white space), as the protocol defines it."""
    for k, v in pos.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise InvalidArgument(f"position {k!r}={v!r}: want an int >= 0")
    body = ",".join(f"{json.dumps(k, ensure_ascii=False)}:{v}" for k, v in sorted(pos.items(), key=lambda kv: kv[0].encode()))
    return ("{\"positions\":{" + body + "}}").encode()


def parse_positions(checkpoint: Optional[bytes]) -> dict:
    """The positions of a mergeable checkpoint (``{}`` for ``None``).

    Raises:
        InvalidArgument: when the checkpoint is not in the positions form.
    """
    if checkpoint is None:
        return {}
    try:
        obj = json.loads(checkpoint)
        pos = obj["positions"]
        if not isinstance(pos, dict) or len(obj) != 1:
            raise ValueError
        return {str(k): int(v) for k, v in pos.items()}
    except (ValueError, KeyError, TypeError):
        raise InvalidArgument(f"checkpoint {checkpoint[:64]!r} is not in the positions form") from None


def _bytes(cp: Checkpoint) -> bytes:
    b = cp.encode() if isinstance(cp, str) else bytes(cp)
    if not b:
        raise InvalidArgument("a checkpoint is never empty")
    return b


@dataclass(frozen=True)
class WriteResult:
    """What a write committed.

    Attributes:
        rows: rows sent and acknowledged (replays included: the sink skips
            those its checkpoint already covers).
        batches: batches acknowledged.
        checkpoint: the last checkpoint acknowledged, or the resume point
            when nothing was left to send.
        seconds: wall time of the write.
    """

    rows: int
    batches: int
    checkpoint: Optional[bytes]
    seconds: float

    def __str__(self) -> str:
        cp = self.checkpoint.decode(errors="replace") if self.checkpoint else "none"
        return f"{self.rows} rows in {self.batches} batches, {self.seconds:.2f}s, checkpoint {cp}"


class _Endpoint:
    def __init__(self, url: str, *, token: Optional[str] = None, tls_root_certs: Optional[bytes] = None,
                 timeout: Optional[float] = None) -> None:
        kwargs = {}
        if tls_root_certs is not None:
            kwargs["tls_root_certs"] = tls_root_certs
        self.url = url
        self._client = flight.FlightClient(url, **kwargs)
        headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._options = flight.FlightCallOptions(headers=headers, timeout=timeout)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _action(self, kind: str, body: dict) -> list:
        try:
            return [r.body.to_pybytes() for r in self._client.do_action(
                flight.Action(kind, json.dumps(body).encode()), options=self._options)]
        except flight.FlightError as e:
            raise from_flight_error(e) from e
        except pa.ArrowException as e:
            raise from_flight_error(e) from e


class Sink(_Endpoint):
    """A Flightline sink (a ``DoPut`` endpoint), written exactly once.

    Args:
        url: ``grpc://HOST:PORT`` or ``grpc+tls://HOST:PORT``.
        pipeline_id: the key of the sink's checkpoint.
        target: the table, topic or directory inside the sink; ``None``:
            the sink's default.
        token: a bearer token, sent as ``authorization: Bearer …``.
        window: batches in flight before the client waits for an
            acknowledgement (at least 1).
        tls_root_certs: PEM of the CA that signed the sink's certificate.
        timeout: seconds each call may take; ``None``: no limit.
    """

    def __init__(self, url: str, *, pipeline_id: str, target: Optional[str] = None, token: Optional[str] = None,
                 window: int = 4, tls_root_certs: Optional[bytes] = None, timeout: Optional[float] = None) -> None:
        if not pipeline_id:
            raise InvalidArgument("pipeline_id is required")
        if window < 1:
            raise InvalidArgument("window: want at least 1")
        super().__init__(url, token=token, tls_root_certs=tls_root_certs, timeout=timeout)
        self.pipeline_id = pipeline_id
        self.target = target
        self.window = window

    @property
    def checkpoint(self) -> Optional[bytes]:
        """The pipeline's last committed checkpoint (where to resume), or
        ``None`` when it has committed nothing. Read-only: it does not fence
        a running writer."""
        body = {"pipeline_id": self.pipeline_id}
        if self.target:
            body["target"] = self.target
        results = self._action("checkpoint", body)
        return results[0] if results else None

    def describe(self) -> dict:
        """The sink's guarantee: ``{"guarantee": "exactly-once"}`` or
        ``{"guarantee": "at-least-once"}``."""
        results = self._action("describe", {})
        return json.loads(results[0]) if results else {}

    def _descriptor(self, resume_after: Optional[bytes]) -> flight.FlightDescriptor:
        cmd = {"pipeline_id": self.pipeline_id,
               "resume_after": base64.b64encode(resume_after or b"").decode()}
        if self.target:
            cmd["target"] = self.target
        return flight.FlightDescriptor.for_command(json.dumps(cmd).encode())

    def write(self, data: Union[pa.Table, pa.RecordBatch, Iterable[Tuple[pa.RecordBatch, Checkpoint]]],
              checkpoint: Optional[Checkpoint] = None, *, resume_after: Optional[bytes] = None) -> WriteResult:
        """Write data, each batch committed atomically with its checkpoint.

        ``data`` is either a table (or one batch) with ``checkpoint``, the
        position it brings the pipeline to: it is sent as one batch, so it
        commits whole or not at all; or an iterable of ``(batch,
        checkpoint)`` pairs (``checkpoint`` then ``None``), each committed
        with its own. A batch whose checkpoint the sink already holds is a
        replay: the sink skips it and acknowledges it.

        The stream opens with ``resume_after`` (default: the checkpoint read
        now), so a writer that lost a race fails with
        :class:`~flightline.errors.CheckpointMoved` before writing.

        Returns the rows and batches acknowledged. On an error, batches not
        yet acknowledged may or may not be committed: read
        :attr:`checkpoint` and resume after it (:meth:`write_table` does).

        Raises:
            FlightlineError: a subclass per gRPC code (see flightline.errors).
        """
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            if checkpoint is None:
                raise InvalidArgument("a table or batch needs its checkpoint")
            batch = data if isinstance(data, pa.RecordBatch) else _one_batch(data)
            pairs: Iterable[Tuple[pa.RecordBatch, Checkpoint]] = [(batch, checkpoint)]
        else:
            if checkpoint is not None:
                raise InvalidArgument("give checkpoint with a table, or (batch, checkpoint) pairs without it")
            pairs = data
        if resume_after is None:
            resume_after = self.checkpoint
        return self._put(iter(pairs), resume_after)

    def _put(self, pairs: Iterator[Tuple[pa.RecordBatch, Checkpoint]], resume_after: Optional[bytes]) -> WriteResult:
        start = time.monotonic()
        first = next(pairs, None)
        if first is None:
            return WriteResult(0, 0, resume_after, time.monotonic() - start)
        schema = first[0].schema
        inflight: deque = deque()
        rows = batches = 0
        last: Optional[bytes] = None
        writer = reader = None
        try:
            writer, reader = self._client.do_put(self._descriptor(resume_after), schema, options=self._options)

            def ack() -> None:
                nonlocal rows, batches, last
                buf = reader.read()
                want, n = inflight.popleft()
                if buf is None:
                    # The stream ended early: its status is the error, which
                    # pyarrow raises on close.
                    w = writer
                    w.close()
                    raise AckMismatch(f"the sink ended the stream before acknowledging {want!r}")
                got = buf.to_pybytes()
                if got != want:
                    raise AckMismatch(f"acknowledgement {got!r} does not match the checkpoint sent {want!r}")
                rows += n
                batches += 1
                last = want

            for batch, cp in _chain(first, pairs):
                if not batch.schema.equals(schema):
                    raise InvalidArgument(f"batch schema {batch.schema} differs from the stream's {schema}")
                b = _bytes(cp)
                writer.write_with_metadata(batch, pa.py_buffer(b))
                inflight.append((b, batch.num_rows))
                while len(inflight) >= self.window:
                    ack()
            writer.done_writing()
            while inflight:
                ack()
            writer.close()
            writer = None
        except (flight.FlightError, pa.ArrowException) as e:
            raise from_flight_error(e) from e
        finally:
            if writer is not None:
                try:
                    writer.close()
                except Exception:  # the error that brought us here wins
                    pass
        return WriteResult(rows, batches, last, time.monotonic() - start)

    def write_table(self, table: Union[pa.Table, pa.RecordBatch], *, key: str = "table/0", batch_rows: int = 65536,
                    retries: int = 5, backoff: float = 0.5) -> WriteResult:
        """Push a table exactly once, resuming where an earlier run stopped.

        Rows get positions: the checkpoint of the batch ending at row ``n``
        is ``{"positions": {key: n}}``. The write starts at the position the
        sink's checkpoint holds for ``key``, so a run killed at any moment
        and run again with the same table (same rows in the same order)
        lands every row once. A retryable error (UNAVAILABLE, ABORTED,
        INTERNAL without a reason) re-reads the checkpoint and resumes, up
        to ``retries`` times with exponential backoff.

        Raises:
            InvalidArgument: the sink holds a position for ``key`` past the
                table's end (a different table under the same key).
            FlightlineError: a non-retryable error, or the last retryable one.
        """
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if batch_rows < 1:
            raise InvalidArgument("batch_rows: want at least 1")
        started = time.monotonic()
        total_rows = total_batches = 0
        attempt = 0
        while True:
            cp = self.checkpoint
            start = parse_positions(cp).get(key, 0)
            if start > table.num_rows:
                raise InvalidArgument(f"the sink's checkpoint holds {key}={start}, past the table's {table.num_rows} rows")

            def pairs(start: int = start) -> Iterator[Tuple[pa.RecordBatch, bytes]]:
                pos = dict(parse_positions(cp))
                for off in range(start, table.num_rows, batch_rows):
                    batch = _one_batch(table.slice(off, batch_rows))
                    pos[key] = off + batch.num_rows
                    yield batch, positions(pos)

            try:
                r = self._put(pairs(), cp)
            except FlightlineError as e:
                if not e.retryable or attempt >= retries:
                    raise
                time.sleep(backoff * (2 ** attempt))
                attempt += 1
                continue
            total_rows += r.rows
            total_batches += r.batches
            return WriteResult(total_rows, total_batches, r.checkpoint, time.monotonic() - started)


def _one_batch(t: pa.Table) -> pa.RecordBatch:
    return pa.record_batch([c.combine_chunks() for c in t.columns], schema=t.schema)


def _chain(first, rest):
    yield first
    yield from rest


class Source(_Endpoint):
    """A Flightline source (a Flight server offering streams).

    Args:
        url: ``grpc://HOST:PORT`` or ``grpc+tls://HOST:PORT``.
        token, tls_root_certs, timeout: as for :class:`Sink`.
    """

    def streams(self) -> dict:
        """The source's streams: name → Arrow schema."""
        try:
            return {"/".join(p.decode() if isinstance(p, bytes) else p for p in info.descriptor.path): info.schema
                    for info in self._client.list_flights(options=self._options)}
        except (flight.FlightError, pa.ArrowException) as e:
            raise from_flight_error(e) from e

    def read(self, stream: Optional[str] = None, *, after: Optional[Checkpoint] = None,
             pipeline_id: Optional[str] = None, heartbeats: bool = False) -> Iterator[Tuple[pa.RecordBatch, bytes]]:
        """Read ``stream`` after checkpoint ``after``, yielding ``(batch,
        checkpoint)``: the checkpoint is the position reached once the batch
        is durably written downstream.

        Args:
            stream: the stream's name; ``None``: the source's only stream.
            after: resume after this checkpoint (the first row yielded is the
                first it does not cover); ``None``: the source's default start.
            pipeline_id: the reading pipeline (the Kafka source's group).
            heartbeats: also yield the 0-row batches that repeat the last
                checkpoint (a 0-row batch with a new checkpoint is always
                yielded: a sink commits it alone).

        A bounded stream ends when the source has nothing more; an unbounded
        one runs until the iterator is closed.
        """
        if stream is None:
            names = list(self.streams())
            if len(names) != 1:
                raise InvalidArgument(f"the source has {len(names)} streams ({', '.join(names)}): name one")
            stream = names[0]
        ticket = {"stream": stream}
        if pipeline_id:
            ticket["pipeline_id"] = pipeline_id
        if after is not None:
            ticket["checkpoint"] = base64.b64encode(_bytes(after)).decode()
        try:
            reader = self._client.do_get(flight.Ticket(json.dumps(ticket).encode()), options=self._options)
            last: Optional[bytes] = None
            for chunk in reader:
                cp = chunk.app_metadata.to_pybytes() if chunk.app_metadata is not None else None
                if cp is None:
                    raise AckMismatch("a batch without a checkpoint: the source broke the protocol")
                if chunk.data.num_rows == 0 and cp == last and not heartbeats:
                    continue
                last = cp
                yield chunk.data, cp
        except (flight.FlightError, pa.ArrowException) as e:
            raise from_flight_error(e) from e

    def commit(self, stream: str, checkpoint: Checkpoint, *, pipeline_id: str) -> None:
        """Tell the source everything up to ``checkpoint`` is durable
        downstream (advisory: the Kafka source commits its group's offsets)."""
        self._action("commit", {"stream": stream, "pipeline_id": pipeline_id,
                                "checkpoint": base64.b64encode(_bytes(checkpoint)).decode()})
