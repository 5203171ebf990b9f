"""A Python transform served over DoExchange between the engine's source
and sink: every row once, transformed, with a filter that drops batches."""

import os
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flightline import find_flightline_bin
from flightline.transform import serve_transform
from test_client import read_dir


def big_orders(batch):
    kept = batch.filter(pc.greater_equal(batch.column("quantity"), 5))
    return kept.append_column("total", pc.multiply(kept.column("amount"), pc.cast(kept.column("quantity"), pa.float64())))


def run_pipeline(tmp_path, transform_url, pipeline="py-transform"):
    out = tmp_path / "out"
    p = subprocess.run([find_flightline_bin(), "run", "--source", "generator:?rows=2000&batch_rows=100",
                        "--sink", f"dir:{out}", "--stream", "orders", "--pipeline", pipeline,
                        "--transform", transform_url], capture_output=True, text=True, timeout=120)
    return p, out


def test_python_transform_in_a_pipeline(tmp_path):
    server = serve_transform(big_orders, block=False)
    try:
        p, out = run_pipeline(tmp_path, f"grpc://127.0.0.1:{server.port}")
        assert p.returncode == 0, p.stderr[-2000:]
    finally:
        server.shutdown()
    got = read_dir(out)
    assert got.num_rows > 0
    assert pc.min(got.column("quantity")).as_py() >= 5
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "every row once"
    assert got.column("total").to_pylist() == [a * q for a, q in zip(got.column("amount").to_pylist(), got.column("quantity").to_pylist())]


def test_transform_error_stops_the_pipeline(tmp_path):
    def broken(batch):
        raise KeyError("no such column")

    server = serve_transform(broken, block=False)
    try:
        p, _ = run_pipeline(tmp_path, f"grpc://127.0.0.1:{server.port}", "py-broken")
    finally:
        server.shutdown()
    assert p.returncode != 0
    assert "no such column" in p.stderr


def test_polars_transform(tmp_path):
    pl = pytest.importorskip("polars")
    from flightline.transform import polars_transform

    @polars_transform
    def doubled(df):
        return df.with_columns((pl.col("quantity") * 2).alias("quantity2"))

    server = serve_transform(doubled, block=False)
    try:
        p, out = run_pipeline(tmp_path, f"grpc://127.0.0.1:{server.port}", "py-polars")
        assert p.returncode == 0, p.stderr[-2000:]
    finally:
        server.shutdown()
    got = read_dir(out)
    assert got.num_rows == 2000
    assert got.column("quantity2").to_pylist() == [q * 2 for q in got.column("quantity").to_pylist()]
