"""The client against a real served sink and source (docs/protocol.md)."""

import glob
import os
import time

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from conftest import serve
from flightline.client import Sink, Source, parse_positions, positions
from flightline.errors import CheckpointMoved, Fenced, InvalidArgument, NotFound


def read_dir(path):
    """Every row the dir sink committed, from its files (not through Flight)."""
    tables = []
    for f in sorted(glob.glob(os.path.join(path, "**", "*.arrow"), recursive=True)):
        with pa.memory_map(f) as src:
            tables.append(ipc.open_file(src).read_all())
    return pa.concat_tables(tables) if tables else None


def test_positions_canonical():
    assert positions({"b/0": 2, "a/1": 10}) == b'{"positions":{"a/1":10,"b/0":2}}'
    assert parse_positions(b'{"positions":{"a/1":10}}') == {"a/1": 10}
    with pytest.raises(InvalidArgument):
        parse_positions(b"opaque")


def test_sink_round_trip(tmp_path):
    out = tmp_path / "out"
    with serve(["serve-sink", "--sink", f"dir:{out}"]) as url:
        sink = Sink(url, pipeline_id="py-round-trip", window=2)
        assert sink.describe() == {"guarantee": "exactly-once"}
        assert sink.checkpoint is None
        table = pa.table({"id": pa.array(range(1000), pa.int64()), "name": [f"n{i}" for i in range(1000)]})
        r = sink.write_table(table, batch_rows=64)
        assert r.rows == 1000 and r.batches == 16
        assert sink.checkpoint == positions({"table/0": 1000})
        again = sink.write_table(table, batch_rows=64)
        assert again.rows == 0, "a rerun after the end sends nothing"
        # A whole table with one checkpoint, then a replay of it.
        more = pa.table({"id": pa.array(range(1000, 1010), pa.int64()), "name": ["x"] * 10})
        cp = positions({"table/0": 1000, "extra/0": 10})
        assert sink.write(more, cp).rows == 10
        assert sink.write(more, cp).rows == 10, "acknowledged as a replay"
        with pytest.raises(InvalidArgument):
            sink.write(more)  # no checkpoint
        with pytest.raises(InvalidArgument):
            Sink(url, pipeline_id="p", target="../x").write(more, cp)
    got = read_dir(out)
    ids = sorted(got.column("id").to_pylist())
    assert ids == list(range(1010)), "every row once, the replay skipped"


def test_sink_errors(tmp_path):
    with serve(["serve-sink", "--sink", f"dir:{tmp_path}"]) as url:
        table = pa.table({"id": pa.array([1, 2], pa.int64())})
        sink = Sink(url, pipeline_id="py-errors")
        sink.write(table, positions({"a/0": 2}))
        with pytest.raises(CheckpointMoved) as e:
            sink.write(table, positions({"a/0": 4}), resume_after=b"stale")
        assert e.value.retryable

        # Two writers of one pipeline: the older is fenced.
        def pairs(first, n):
            for i in range(first, first + n):
                time.sleep(0.01)
                time.sleep(0.01)
                yield pa.record_batch([pa.array([i], pa.int64())], names=["id"]), positions({"a/0": 10 + i})

        old = Sink(url, pipeline_id="py-fence", window=1)
        gen = pairs(0, 100)
        import threading

        errors = []

        def run_old():
            try:
                old._put(gen, None)
            except Exception as ex:  # noqa: BLE001
                errors.append(ex)

        # Start the old writer, then claim the pipeline with a new one.
        t = threading.Thread(target=run_old)
        t.start()
        time.sleep(0.3)
        new = Sink(url, pipeline_id="py-fence")
        for _ in range(20):  # the old writer moves the checkpoint under us
            try:
                new.write(table, positions({"b/0": 1}))
                break
            except CheckpointMoved:
                continue
        t.join(30)
        assert errors and isinstance(errors[0], (Fenced, CheckpointMoved)), errors
        assert not errors[0].retryable or isinstance(errors[0], CheckpointMoved)


def test_source_read_after(tmp_path):
    with serve(["serve-source", "--source", "generator:?rows=1000&batch_rows=100"]) as url:
        src = Source(url)
        assert list(src.streams()) == ["orders"]
        batches = list(src.read())
        assert sum(b.num_rows for b, _ in batches) == 1000
        cp = batches[3][1]
        rest = list(src.read(after=cp))
        assert sum(b.num_rows for b, _ in rest) == 600
        assert rest[-1][1] == batches[-1][1]
        with pytest.raises(NotFound):
            list(src.read("nope"))
        with pytest.raises(InvalidArgument):
            list(src.read(after=b"not a checkpoint"))
