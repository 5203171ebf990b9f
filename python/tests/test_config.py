"""A config built with the Python API, with `flightline connect`, and by
hand resolve to the same `flightline config show`."""

import os
import subprocess

import pytest

from flightline import find_flightline_bin
from flightline.config import Config, EnvRef, Session
from flightline.errors import ConfigError, PlaintextSecretError
from flightline.kinds import SinkDelta, SinkDir, SinkPostgres, SourceDelta, SourceGenerator, SourceKafka

BY_HAND = """\
sources:
  orders:
    kafka: {brokers: 127.0.0.1:9092, topics: [orders], format: json, schema: orders.avsc}
  gen: generator:?rows=100&batch_rows=10
sinks:
  warehouse:
    postgres: {dsn: 'postgres://loader@db/analytics', table: raw.orders, password: '${WAREHOUSE_PASSWORD}'}
  lake:
    delta: {uri: /data/orders, AWS_REGION: us-east-1}
pipelines:
  orders: {source: orders, sink: warehouse, window: 8}
  gen: {source: sources.gen, sink: sinks.lake, id: gen-to-lake}
"""


def fl(*args, check=True):
    p = subprocess.run([find_flightline_bin(), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"flightline {' '.join(args)}: {p.stderr}")
    return p


def show(path):
    out = fl("config", "show", "--config", str(path)).stdout
    return out.split("\n", 1)[1]  # the first line names the file


@pytest.fixture(autouse=True)
def password(monkeypatch):
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "hunter2")


def test_python_connect_and_hand_agree(tmp_path):
    hand = tmp_path / "hand.yml"
    hand.write_text(BY_HAND)

    py = tmp_path / "py.yml"
    py.write_text("# built from Python\n")
    cfg = Config(py)
    orders = cfg.source("orders", SourceKafka(brokers=["127.0.0.1:9092"], topics=["orders"], format="json",
                                              schema="orders.avsc"))
    wh = cfg.sink("warehouse", SinkPostgres("postgres://loader@db/analytics", table="raw.orders",
                                            password=EnvRef("WAREHOUSE_PASSWORD")))
    cfg.pipeline("orders", source=orders, sink=wh, window=8)
    gen = cfg.source("gen", SourceGenerator(rows=100, batch_rows=10))
    lake = cfg.sink("lake", SinkDelta("/data/orders", AWS_REGION="us-east-1"))
    cfg.pipeline("gen", source=gen, sink=lake, id="gen-to-lake")
    res = cfg.save()
    assert res.written and res.incomplete_pipelines == []
    assert "# built from Python" in py.read_text(), "comments kept"

    cli = tmp_path / "cli.yml"
    for args in (
        ["source", "kafka", "--name", "orders", "--pipeline", "orders", "--brokers", "127.0.0.1:9092",
         "--topics", "orders", "--format", "json", "--schema", "orders.avsc"],
        ["sink", "postgres", "--name", "warehouse", "--pipeline", "orders", "--dsn", "postgres://loader@db/analytics",
         "--table", "raw.orders", "--password", "${WAREHOUSE_PASSWORD}"],
        ["source", "generator", "--name", "gen", "--pipeline", "gen", "--rows", "100", "--batch-rows", "10"],
        ["sink", "delta", "--name", "lake", "--pipeline", "gen", "--uri", "/data/orders", "--AWS_REGION", "us-east-1"],
    ):
        fl("connect", *args, "--config", str(cli))
    # Pipeline keys other than the links come from config apply.
    cfg2 = Config(cli)
    cfg2.pipeline("orders", window=8)
    cfg2.pipeline("gen", id="gen-to-lake")
    cfg2.save()

    assert show(py) == show(hand) == show(cli)
    assert "hunter2" not in show(py)

    # Load, discover, and an unchanged save.
    assert Config.load(py).save().changed is False
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    (tmp_path / "flightline.yml").write_text(BY_HAND)
    assert Config.discover(sub).path == str(tmp_path / "flightline.yml")


def test_refusals_leave_the_file(tmp_path):
    path = tmp_path / "flightline.yml"
    path.write_text(BY_HAND)
    before = path.read_text()
    with pytest.raises(PlaintextSecretError):
        SinkPostgres("postgres://db/a", password="hunter2")  # type: ignore[arg-type]
    cfg = Config.load(path)
    cfg.sink("warehouse", SinkDelta("/x"))
    with pytest.raises(ConfigError) as e:
        cfg.save()
    assert e.value.reason == "kind_change"
    cfg = Config.load(path)
    cfg.deadletter_sink("rejects", SinkPostgres("postgres://loader@db/analytics", table="raw.orders",
                                                password=EnvRef("WAREHOUSE_PASSWORD")), pipeline="orders")
    with pytest.raises(ConfigError) as e:
        cfg.save()
    assert "would not load" in str(e.value)
    assert path.read_text() == before
    with pytest.raises(ConfigError):
        SourceKafka(isolation="dirty")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        Config.load(tmp_path / "missing.yml")


def test_session_sync_and_check(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    table = tmp_path / "in"
    deltalake.write_deltalake(str(table), pa.table({"id": pa.array(range(1000), pa.int64())}))
    path = tmp_path / "flightline.yml"
    cfg = Config(path)
    src = cfg.source("in", SourceDelta(str(table)))
    out = cfg.sink("out", SinkDir(str(tmp_path / "out")))
    pipe = cfg.pipeline("copy", source=src, sink=out)
    cfg.save()
    s = Session(pipe)
    check = s.check()
    assert check.ok, str(check)
    r = s.sync(once=True)
    assert r.rows == 1000 and r.pipeline == "copy" and r.checkpoint
    assert s.sync(once=True).rows == 0, "a second run resumes at the end"
    from test_client import read_dir

    assert sorted(read_dir(tmp_path / "out").column("id").to_pylist()) == list(range(1000))
