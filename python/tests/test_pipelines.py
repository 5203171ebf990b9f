"""The pipelines layer: the seeds' shapes, pydantic schemas, and the seed
example (Kafka -> Delta with a pydantic Order) against the test broker."""

import datetime
import json
import os
import subprocess
import sys
import textwrap
import uuid
from typing import List, Optional

import pyarrow as pa
import pytest

from conftest import serve, service
from flightline.avro import avro_schema
from flightline.client import Sink, positions
from flightline.config import EnvRef
from flightline.errors import PipelineError, PlaintextSecretError, SchemaMappingError
from flightline.kafka import KafkaConsumerConfig
from flightline.pipelines import (BigQuerySink, DatabricksSink, DeltaSink, KafkaSink, Pipeline, PostgresSink,
                                  S3Sink, SnowflakeSink, DirSink, GeneratorSource, kafka_to_delta)


def test_sinks_render_their_kinds():
    assert DeltaSink("/data/orders", pipeline_id="orders-to-delta").entry(".") == {"delta": {"uri": "/data/orders"}}
    assert PostgresSink("postgres://u@db/a", table="orders_sink", pipeline_id="orders-to-pg").entry(".") == \
        {"postgres": {"dsn": "postgres://u@db/a", "table": "orders_sink"}}
    assert KafkaSink("127.0.0.1:9092", topic="orders-mirror", pipeline_id="mirror").entry(".") == \
        {"kafka": {"brokers": ["127.0.0.1:9092"], "topic": "orders-mirror", "value_format": "raw"}}
    assert DatabricksSink("main.sales.events", pipeline_id="orders-to-uc").entry(".") == \
        {"databricks": {"location": "main.sales.events"}}
    assert S3Sink("bucket/prefix", pipeline_id="orders-to-s3", storage_options={"AWS_REGION": "us-east-1"}).entry(".") == \
        {"s3": {"prefix": "bucket/prefix", "AWS_REGION": "us-east-1"}}
    assert SnowflakeSink("u@acct/db/schema", table="orders_sink", pipeline_id="orders-to-sf").entry(".")["snowflake"]["table"] == "orders_sink"
    assert BigQuerySink("proj/ds", table="orders_sink", key=["id"], pipeline_id="orders-to-bq").entry(".") == \
        {"bigquery": {"location": "proj/ds", "table": "orders_sink", "key": ["id"]}}
    with pytest.raises(PlaintextSecretError):
        DeltaSink("s3://b/t", pipeline_id="p", storage_options={"AWS_SECRET_ACCESS_KEY": "plain"})
    assert DeltaSink("s3://b/t", pipeline_id="p", storage_options={"AWS_SECRET_ACCESS_KEY": EnvRef("AWS_SECRET")}) \
        .entry(".")["delta"]["AWS_SECRET_ACCESS_KEY"] == "${AWS_SECRET}"


def test_pydantic_schema_and_a_field_that_cannot_be_mapped():
    pydantic = pytest.importorskip("pydantic")

    class Line(pydantic.BaseModel):
        sku: str
        qty: int

    class Order(pydantic.BaseModel):
        id: int
        total: float
        note: Optional[str] = None
        at: datetime.datetime
        lines: List[Line]

    s = avro_schema(Order)
    assert s["name"] == "Order"
    assert [f["name"] for f in s["fields"]] == ["id", "total", "note", "at", "lines"]
    assert s["fields"][0]["type"] == "long" and s["fields"][1]["type"] == "double"
    assert s["fields"][2] == {"name": "note", "type": ["null", "string"], "default": None}
    assert s["fields"][4]["type"]["items"]["name"] == "Line"

    import decimal

    class Bad(pydantic.BaseModel):
        id: int
        lines: List["BadLine"]

    class BadLine(pydantic.BaseModel):
        price: decimal.Decimal

    Bad.model_rebuild()
    with pytest.raises(SchemaMappingError) as e:
        avro_schema(Bad)
    assert e.value.field == "lines[].price"
    assert "Decimal" in str(e.value)


def test_pipeline_run_result_and_error(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    from flightline.pipelines import DeltaSource

    src = tmp_path / "src"
    deltalake.write_deltalake(str(src), pa.table({"id": pa.array(range(500), pa.int64())}))
    pipe = Pipeline(DeltaSource(str(src)), DeltaSink(str(tmp_path / "dst"), pipeline_id="copy"))
    r = pipe.run()
    assert r.rows == 500 and r.seconds > 0 and r.checkpoint
    assert pipe.run().rows == 0
    assert sorted(deltalake.DeltaTable(str(tmp_path / "dst")).to_pyarrow_table().column("id").to_pylist()) == list(range(500))
    bad = Pipeline(DeltaSource(str(tmp_path / "missing")), DirSink(str(tmp_path / "o"), pipeline_id="bad"))
    with pytest.raises(PipelineError) as e:
        bad.run()
    assert e.value.returncode != 0 and "missing" in str(e.value)


def avro_long(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


SEED = textwrap.dedent('''
    from pydantic import BaseModel
    from flightline.kafka import KafkaConsumerConfig
    from flightline.pipelines import kafka_to_delta


    class Order(BaseModel):
        id: int
        total: float


    pipe = kafka_to_delta(
        KafkaConsumerConfig(bootstrap_servers="localhost:9092", topics=["orders"],
                            group_id="orders-to-delta", auto_offset_reset="earliest"),
        "s3://lake/orders",
        pipeline_id="orders-to-delta",
        value_format="avro",
        schema=Order,
    )
    pipe.run()
''')


@pytest.mark.parametrize("where", ["local", "s3"])
def test_seed_example_kafka_to_delta(tmp_path, where):
    """The issue's example, as written but for the broker, topic and table
    (a local path, or a fresh bucket on the S3 emulator, credentials from
    the environment), lands every record once (run twice: the second adds
    nothing)."""
    pytest.importorskip("pydantic")
    deltalake = pytest.importorskip("deltalake")
    import struct
    import urllib.request

    brokers = service("FLIGHTLINE_KAFKA_BROKERS")
    env = dict(os.environ)
    storage = None
    if where == "local":
        table = str(tmp_path / "orders")
    else:
        moto = service("FLIGHTLINE_MOTO_ENDPOINT")
        bucket = f"lake-{uuid.uuid4().hex[:8]}"
        urllib.request.urlopen(urllib.request.Request(f"{moto}/{bucket}", method="PUT")).close()
        table = f"s3://{bucket}/orders"
        storage = {"AWS_ENDPOINT_URL": moto, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                   "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
        env.update(storage)
    topic = f"py-orders-{uuid.uuid4().hex[:8]}"
    n = 3000
    # Produce Avro values with our own client into a served Kafka sink.
    values = [avro_long(i) + struct.pack("<d", i * 1.5) for i in range(n)]
    with serve(["serve-sink", "--sink", f"kafka:?brokers={brokers}&topic={topic}&create_topics=3"]) as url:
        r = Sink(url, pipeline_id=f"producer-{topic}").write_table(
            pa.table({"key": pa.array([str(i).encode() for i in range(n)], pa.binary()),
                      "value": pa.array(values, pa.binary())}), batch_rows=500)
        assert r.rows == n
    code = (SEED.replace("localhost:9092", brokers).replace('topics=["orders"]', f'topics=["{topic}"]')
            .replace('"s3://lake/orders"', repr(table)) + "\nprint(pipe.run())\n")
    script = tmp_path / "seed.py"
    script.write_text(code)
    for _ in range(2):
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
    got = deltalake.DeltaTable(table, storage_options=storage).to_pyarrow_table()
    assert got.num_rows == n, "every record once"
    assert sorted(got.column("id").to_pylist()) == list(range(n))
    assert {(r["id"], r["total"]) for r in got.select(["id", "total"]).to_pylist()} == {(i, i * 1.5) for i in range(n)}
    assert len({(r["partition"], r["offset"]) for r in got.select(["partition", "offset"]).to_pylist()}) == n
