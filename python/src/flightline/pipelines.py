"""Pipelines in the shape of the seeds' API, run by the Go engine.

::

    from flightline.kafka import KafkaConsumerConfig
    from flightline.pipelines import kafka_to_delta

    pipe = kafka_to_delta(KafkaConsumerConfig(bootstrap_servers="localhost:9092", topics=["orders"]),
                          "/data/orders", pipeline_id="orders-to-delta", value_format="avro", schema=Order)
    result = pipe.run()          # flightline sync --once on a generated config
    print(result)                # rows, batches, time, checkpoint

A pipeline is a source, transforms and a sink. :meth:`Pipeline.run` writes
them as a flightline.yml (JSON, which is YAML) in a temporary directory,
with the value schema of ``schema=`` as an ``.avsc`` beside it, and runs
``flightline sync`` on it: rows never pass through Python. The pipeline id
is the key of the sink's checkpoint, so a run resumes where the last one
stopped, exactly once.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import kinds as K
from ._kindbase import EnvRef, Kind
from .avro import avro_schema
from .config import SyncResult, run_sync
from .errors import ConfigError
from .kafka import KafkaConsumerConfig

__all__ = [
    "Pipeline", "Endpoint", "DeltaSink", "PostgresSink", "KafkaSink", "DatabricksSink", "S3Sink", "SnowflakeSink",
    "BigQuerySink", "DirSink", "FlightSink", "AdbcSink", "KafkaSource", "DeltaSource", "PostgresSource",
    "GeneratorSource", "FlightSource", "SnowflakeSource", "BigQuerySource", "DatabricksSource", "kafka_to",
    "kafka_to_delta", "kafka_to_postgres", "kafka_to_s3", "kafka_to_kafka",
]

StorageOptions = Optional[Mapping[str, Union[str, EnvRef]]]


class Endpoint:
    """A source or sink of a pipeline: a kind of flightline.yml
    (:mod:`flightline.kinds`), plus what the pipeline entry takes from it."""

    def __init__(self, kind: Kind, *, pipeline_id: Optional[str] = None, target: Optional[str] = None,
                 files: Optional[Dict[str, str]] = None) -> None:
        self.kind = kind
        self.pipeline_id = pipeline_id
        self.target = target
        self.files = files or {}  # file name -> content, written beside the config

    def entry(self, workdir: str) -> Dict[str, Any]:
        fields = dict(self.kind.fields)
        for key, v in fields.items():
            if isinstance(v, str) and v.startswith("@file:"):
                fields[key] = os.path.join(workdir, v[len("@file:"):])
        return {self.kind.kind: fields}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r})"


def _storage(storage_options: StorageOptions) -> Dict[str, Any]:
    return dict(storage_options or {})


def _kind(cls, *args, **kwargs) -> Kind:
    try:
        return cls(*args, **kwargs)
    except TypeError as e:
        raise ConfigError(f"{cls.kind}: {e}") from None


class DeltaSink(Endpoint):
    """A Delta Lake table, exactly once (each batch and its checkpoint in one commit).

    Args:
        uri: a local path or ``s3://BUCKET/PREFIX``.
        pipeline_id: the key of the table's checkpoint.
        storage_options: ``AWS_REGION``, ``AWS_ENDPOINT_URL``, … (secrets as EnvRef).
        schema_evolution: add new nullable columns instead of refusing a batch.
    """

    def __init__(self, uri: str, *, pipeline_id: Optional[str] = None, storage_options: StorageOptions = None,
                 schema_evolution: Optional[bool] = None) -> None:
        super().__init__(_kind(K.SinkDelta, uri, schema_evolution=schema_evolution, **_storage(storage_options)),
                         pipeline_id=pipeline_id)


class PostgresSink(Endpoint):
    """A PostgreSQL table, exactly once (COPY and the checkpoint in one transaction).

    Args:
        dsn: ``postgres://USER@HOST/DB`` (a password as ``password=EnvRef(…)``).
        table: the table (``schema.table``).
    """

    def __init__(self, dsn: str, *, table: str, pipeline_id: Optional[str] = None,
                 password: Optional[EnvRef] = None, **options: Any) -> None:
        super().__init__(_kind(K.SinkPostgres, dsn, table=table, password=password, **options), pipeline_id=pipeline_id)


class KafkaSink(Endpoint):
    """A Kafka topic, exactly once (transactions); values written raw.

    Args:
        bootstrap_servers: ``HOST:PORT`` (comma-separated) or a list.
        topic: the topic written.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str]], *, topic: str,
                 pipeline_id: Optional[str] = None, value_format: str = "raw", **options: Any) -> None:
        brokers = bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        super().__init__(_kind(K.SinkKafka, brokers=brokers, topic=topic, value_format=value_format, **options),
                         pipeline_id=pipeline_id)


class DatabricksSink(Endpoint):
    """A Unity Catalog table (``catalog.schema.table``), written as Delta, exactly once."""

    def __init__(self, table: str, *, pipeline_id: Optional[str] = None, host: Optional[str] = None,
                 token_env: Optional[str] = None, storage_options: StorageOptions = None, **options: Any) -> None:
        super().__init__(_kind(K.SinkDatabricks, table, host=host, token_env=token_env, **options,
                               **_storage(storage_options)), pipeline_id=pipeline_id)


class S3Sink(Endpoint):
    """Part files (``format``: parquet, jsonl, csv) under
    ``BUCKET/PREFIX/<target>/``, exactly once on a store that honours
    ``If-None-Match: *`` (checked when the pipeline opens);
    ``commit="at-least-once"`` for other stores: one Parquet object per batch
    at a deterministic key (a replay rewrites the same object)."""

    def __init__(self, prefix: str, *, pipeline_id: Optional[str] = None, storage_options: StorageOptions = None,
                 **options: Any) -> None:
        super().__init__(_kind(K.SinkS3, prefix, **options, **_storage(storage_options)), pipeline_id=pipeline_id)


class SnowflakeSink(Endpoint):
    """A Snowflake table, exactly once. ``dsn`` is the kind's location
    (docs/config.md, snowflake)."""

    def __init__(self, dsn: str, *, table: str, pipeline_id: Optional[str] = None, **options: Any) -> None:
        super().__init__(_kind(K.SinkSnowflake, dsn, table=table, **options), pipeline_id=pipeline_id)


class BigQuerySink(Endpoint):
    """A BigQuery table, exactly once by ``key`` (a MERGE on those columns).
    ``dsn`` is the kind's location (docs/config.md, bigquery)."""

    def __init__(self, dsn: str, *, table: str, key: Sequence[str], pipeline_id: Optional[str] = None,
                 **options: Any) -> None:
        super().__init__(_kind(K.SinkBigQuery, dsn, table=table, key=list(key), **options), pipeline_id=pipeline_id)


class AdbcSink(Endpoint):
    """A table through an ADBC driver (``driver`` is its shared library)."""

    def __init__(self, driver: str, *, table: str, uri: Optional[str] = None, pipeline_id: Optional[str] = None,
                 **options: Any) -> None:
        super().__init__(_kind(K.SinkAdbc, driver, table=table, uri=uri, **options), pipeline_id=pipeline_id)


class DirSink(Endpoint):
    """Arrow IPC files under a local directory, exactly once."""

    def __init__(self, path: str, *, pipeline_id: Optional[str] = None) -> None:
        super().__init__(_kind(K.SinkDir, path), pipeline_id=pipeline_id)


class FlightSink(Endpoint):
    """A remote Flightline sink (``grpc://`` or ``grpc+tls://``)."""

    def __init__(self, url: str, *, pipeline_id: Optional[str] = None, target: Optional[str] = None,
                 token: Optional[EnvRef] = None, tls_ca: Optional[str] = None) -> None:
        super().__init__(_kind(K.SinkGrpc, url=url, token=token, tls_ca=tls_ca), pipeline_id=pipeline_id, target=target)


class KafkaSource(Endpoint):
    """Kafka topics, values decoded by ``value_format``.

    Args:
        consumer: where and how to read.
        value_format: ``raw`` (key and value bytes), ``json`` or ``avro``
            (typed columns, decoded with ``schema``).
        schema: a pydantic model (or dataclass) whose Avro form is the value
            schema; or a dict (an Avro schema), or the path of an ``.avsc``.
        registry: a Confluent schema registry URL (``avro`` values in the
            Confluent wire format).
    """

    def __init__(self, consumer: KafkaConsumerConfig, *, value_format: str = "raw", schema: Any = None,
                 registry: Optional[str] = None) -> None:
        fields = consumer.fields()
        files: Dict[str, str] = {}
        if value_format not in ("raw", "json", "avro"):
            raise ConfigError(f"value_format={value_format!r}: want raw, json or avro")
        fields["format"] = value_format
        if value_format != "raw":
            if schema is None:
                raise ConfigError(f"value_format={value_format!r} needs schema= (a pydantic model, a dict or an .avsc path)")
            if isinstance(schema, str):
                fields["schema"] = schema
            else:
                files["value.avsc"] = json.dumps(schema if isinstance(schema, dict) else avro_schema(schema))
                fields["schema"] = "@file:value.avsc"
        if registry:
            fields["registry"] = registry
        super().__init__(_kind(K.SourceKafka, **fields), files=files)
        self.value_format = value_format
        self.topics = list(consumer.topics)


class DeltaSource(Endpoint):
    """A Delta table's rows, in commit order."""

    def __init__(self, uri: str, *, storage_options: StorageOptions = None, **options: Any) -> None:
        super().__init__(_kind(K.SourceDelta, uri, **options, **_storage(storage_options)))


class PostgresSource(Endpoint):
    """A PostgreSQL table read incrementally by ``(watermark, key)``."""

    def __init__(self, dsn: str, *, table: str, watermark: str, key: str, password: Optional[EnvRef] = None,
                 **options: Any) -> None:
        super().__init__(_kind(K.SourcePostgres, dsn, table=table, watermark=watermark, key=key, password=password, **options))


class SnowflakeSource(Endpoint):
    """A Snowflake table read incrementally by ``(cursor, tiebreak)``."""

    def __init__(self, dsn: str, *, table: str, cursor: str, tiebreak: str, **options: Any) -> None:
        super().__init__(_kind(K.SourceSnowflake, dsn, table=table, cursor=cursor, tiebreak=tiebreak, **options))


class BigQuerySource(Endpoint):
    """A BigQuery table read incrementally by ``(cursor, tiebreak)``."""

    def __init__(self, dsn: str, *, table: str, cursor: str, tiebreak: str, **options: Any) -> None:
        super().__init__(_kind(K.SourceBigQuery, dsn, table=table, cursor=cursor, tiebreak=tiebreak, **options))


class DatabricksSource(Endpoint):
    """A Unity Catalog table's rows, in commit order."""

    def __init__(self, table: str, *, storage_options: StorageOptions = None, **options: Any) -> None:
        super().__init__(_kind(K.SourceDatabricks, table, **options, **_storage(storage_options)))


class GeneratorSource(Endpoint):
    """Deterministic synthetic orders (``rows=0``: unbounded)."""

    def __init__(self, *, rows: int, batch_rows: Optional[int] = None, stream: Optional[str] = None) -> None:
        super().__init__(_kind(K.SourceGenerator, rows=rows, batch_rows=batch_rows, stream=stream))


class FlightSource(Endpoint):
    """A remote Flightline source (``grpc://`` or ``grpc+tls://``)."""

    def __init__(self, url: str, *, token: Optional[EnvRef] = None, tls_ca: Optional[str] = None) -> None:
        super().__init__(_kind(K.SourceGrpc, url=url, token=token, tls_ca=tls_ca))


class Pipeline:
    """A source, transforms and a sink, run by ``flightline sync``.

    Args:
        source, sink: the ends.
        pipeline_id: the key of the sink's checkpoint (default: the sink's
            ``pipeline_id``).
        transforms: ``builtin:…`` specs or ``grpc://`` transform services,
            in order.
        stream: the source stream (default: its only one).
        window: batches in flight between source and sink.
        plain_views: copy view columns (a Kafka source's key and value) into
            plain ones, for sinks without view types (PostgreSQL).
    """

    def __init__(self, source: Endpoint, sink: Endpoint, *, pipeline_id: Optional[str] = None,
                 transforms: Sequence[str] = (), stream: Optional[str] = None, window: Optional[int] = None,
                 plain_views: bool = False) -> None:
        pid = pipeline_id or sink.pipeline_id
        if not pid:
            raise ConfigError("a pipeline needs a pipeline_id (the key of the sink's checkpoint)")
        self.source, self.sink, self.pipeline_id = source, sink, pid
        self.transforms, self.stream, self.window = list(transforms), stream, window
        self.plain_views = plain_views

    def config(self, workdir: str = ".") -> Dict[str, Any]:
        """The flightline.yml of this pipeline, as a dict."""
        p: Dict[str, Any] = {"source": "sources.source", "sink": "sinks.sink", "id": self.pipeline_id}
        if self.transforms:
            p["transforms"] = list(self.transforms)
        if self.stream:
            p["stream"] = self.stream
        if self.sink.target:
            p["target"] = self.sink.target
        if self.window:
            p["window"] = str(self.window)
        if self.plain_views:
            p["plain_views"] = "true"
        return {"sources": {"source": self.source.entry(workdir)}, "sinks": {"sink": self.sink.entry(workdir)},
                "pipelines": {self.pipeline_id: p}}

    def write_config(self, workdir: str) -> str:
        """Write the config (and the files it names) into workdir; return its path."""
        os.makedirs(workdir, exist_ok=True)
        for ep in (self.source, self.sink):
            for name, content in ep.files.items():
                with open(os.path.join(workdir, name), "w") as f:
                    f.write(content)
        path = os.path.join(workdir, "flightline.yml")
        with open(path, "w") as f:
            json.dump(self.config(workdir), f, indent=2)
        return path

    def run(self, *, once: bool = True, timeout: Optional[float] = None, workdir: Optional[str] = None) -> SyncResult:
        """Run the pipeline with the engine: with ``once`` (the default)
        until the sink holds everything the source held at the start, then
        return what was written; without, until the process is stopped.

        Raises:
            PipelineError: the engine failed; ``events`` holds its JSON log.
        """
        if workdir is not None:
            results = run_sync(self.write_config(workdir), self.pipeline_id, once=once, timeout=timeout)
        else:
            with tempfile.TemporaryDirectory(prefix="flightline-") as d:
                results = run_sync(self.write_config(d), self.pipeline_id, once=once, timeout=timeout)
        if not results:
            return SyncResult(self.pipeline_id, 0, 0, 0, 0.0, "")
        return results[0]

    def __repr__(self) -> str:
        return f"Pipeline({self.pipeline_id!r}: {self.source!r} -> {self.sink!r})"


def kafka_to(consumer: KafkaConsumerConfig, sink: Endpoint, *, pipeline_id: Optional[str] = None,
             value_format: str = "json", schema: Any = None, flatten: bool = True,
             transforms: Sequence[str] = (), plain_views: bool = False) -> Pipeline:
    """A pipeline from Kafka to ``sink``. With a typed ``value_format`` and
    ``flatten``, the decoded value's fields become columns (beside the
    record's partition, offset, timestamp and key)."""
    if len(consumer.topics) != 1:
        raise ConfigError("a pipeline reads one topic: give one in topics=")
    src = KafkaSource(consumer, value_format=value_format, schema=schema)
    ts = list(transforms)
    if flatten and value_format != "raw":
        ts.insert(0, "builtin:flatten?column=value")
    return Pipeline(src, sink, pipeline_id=pipeline_id or sink.pipeline_id, transforms=ts,
                    stream=consumer.topics[0], plain_views=plain_views)


def kafka_to_delta(consumer: KafkaConsumerConfig, uri: str, *, pipeline_id: str, value_format: str = "json",
                   schema: Any = None, storage_options: StorageOptions = None, flatten: bool = True) -> Pipeline:
    """Kafka into a Delta table at ``uri`` (a path or ``s3://…``), exactly once."""
    return kafka_to(consumer, DeltaSink(uri, pipeline_id=pipeline_id, storage_options=storage_options),
                    value_format=value_format, schema=schema, flatten=flatten)


def kafka_to_postgres(consumer: KafkaConsumerConfig, dsn: str, *, table: str, pipeline_id: str,
                      value_format: str = "json", schema: Any = None, password: Optional[EnvRef] = None) -> Pipeline:
    """Kafka into a PostgreSQL table, exactly once."""
    return kafka_to(consumer, PostgresSink(dsn, table=table, pipeline_id=pipeline_id, password=password),
                    value_format=value_format, schema=schema, plain_views=True)


def kafka_to_s3(consumer: KafkaConsumerConfig, prefix: str, *, pipeline_id: str, value_format: str = "json",
                schema: Any = None, storage_options: StorageOptions = None) -> Pipeline:
    """Kafka into Parquet objects under ``BUCKET/PREFIX``."""
    return kafka_to(consumer, S3Sink(prefix, pipeline_id=pipeline_id, storage_options=storage_options),
                    value_format=value_format, schema=schema)


def kafka_to_kafka(consumer: KafkaConsumerConfig, bootstrap_servers: Union[str, Sequence[str]], *, topic: str,
                   pipeline_id: str) -> Pipeline:
    """Mirror a topic's raw records into another, exactly once."""
    return kafka_to(consumer, KafkaSink(bootstrap_servers, topic=topic, pipeline_id=pipeline_id),
                    value_format="raw", flatten=False)
