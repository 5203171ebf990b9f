"""Build and edit flightline.yml from Python, and run its pipelines.

::

    from flightline.config import Config, EnvRef, Session
    from flightline.kinds import SourceKafka, SinkPostgres

    cfg = Config.load("flightline.yml")
    orders = cfg.source("orders", SourceKafka(brokers=["127.0.0.1:9092"], topics=["orders"]))
    wh = cfg.sink("warehouse", SinkPostgres("postgres://loader@db/analytics", table="raw.orders",
                                            password=EnvRef("WAREHOUSE_PASSWORD")))
    pipe = cfg.pipeline("orders", source=orders, sink=wh)
    cfg.save()
    Session(pipe).sync(once=True)

:meth:`Config.save` does not write YAML itself: it hands the edit to the
binary's merge writer (``flightline config apply --json``), the one
``flightline connect`` uses, which keeps the file's comments and order,
refuses plaintext secrets and kind changes, loads the whole result with the
real loader, and replaces the file atomically. Python and the command line
cannot disagree.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._bin import find_flightline_bin
from ._kindbase import EnvRef, Kind
from .errors import ConfigError, PipelineError

__all__ = ["Config", "EnvRef", "Ref", "PipelineRef", "ApplyResult", "Session", "SyncResult", "CheckResult"]

DEFAULT_FILE = "flightline.yml"


@dataclass(frozen=True)
class Ref:
    """A reference to an entry: ``sinks.warehouse``."""

    section: str
    name: str

    def __str__(self) -> str:
        return f"{self.section}.{self.name}"


@dataclass(frozen=True)
class PipelineRef:
    """A pipeline of a config file."""

    config: "Config"
    name: str

    def __str__(self) -> str:
        return f"pipelines.{self.name}"


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`Config.save` did.

    Attributes:
        path: the file.
        changed: the result differs from the file.
        written: it was written (not a dry run).
        incomplete_pipelines: pipelines still missing a source or a sink.
        yaml: the resulting file.
    """

    path: str
    changed: bool
    written: bool
    incomplete_pipelines: List[str]
    yaml: str


def _run(args: Sequence[str], *, input: Optional[str] = None, timeout: Optional[float] = None,
         env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    return subprocess.run([find_flightline_bin(), *args], input=input, capture_output=True, text=True,
                          timeout=timeout, env=env)


class Config:
    """A flightline.yml and the edits pending on it.

    Edits (:meth:`source`, :meth:`sink`, :meth:`pipeline`, …) are recorded
    and return references at once; :meth:`save` applies them all in one
    validated, atomic write.
    """

    def __init__(self, path: Union[str, os.PathLike] = DEFAULT_FILE) -> None:
        self.path = os.fspath(path)
        self._entries: List[Dict[str, Any]] = []
        self._pipelines: List[Dict[str, Any]] = []

    @classmethod
    def load(cls, path: Union[str, os.PathLike] = DEFAULT_FILE) -> "Config":
        """The config at path, which must exist and load.

        Raises:
            FileNotFoundError: no such file.
            ConfigError: the binary's loader refuses it.
        """
        cfg = cls(path)
        if not os.path.exists(cfg.path):
            raise FileNotFoundError(cfg.path)
        cfg._apply(dry_run=True)
        return cfg

    @classmethod
    def discover(cls, start: Union[str, os.PathLike, None] = None) -> "Config":
        """The flightline.yml of ``start`` (default: the working directory)
        or of the nearest directory above it.

        Raises:
            FileNotFoundError: none up to the root.
        """
        d = os.path.abspath(os.fspath(start) if start is not None else os.getcwd())
        while True:
            p = os.path.join(d, DEFAULT_FILE)
            if os.path.isfile(p):
                return cls.load(p)
            parent = os.path.dirname(d)
            if parent == d:
                raise FileNotFoundError(f"no {DEFAULT_FILE} in {os.path.abspath(start or os.getcwd())} or above")
            d = parent

    def _entry(self, section: str, name: str, kind: Kind, pipeline: Union[str, PipelineRef, None],
               replace: bool) -> Ref:
        if not isinstance(kind, Kind):
            raise TypeError(f"{section}.{name}: want a kind from flightline.kinds, not {type(kind).__name__}")
        if section == "deadletter_sinks" and kind.section != "sinks" or section != "deadletter_sinks" and kind.section != section:
            raise ConfigError(f"{section}.{name}: {type(kind).__name__} is not a kind of {section}", reason="unknown")
        e: Dict[str, Any] = {"section": section, "name": name, "kind": kind.kind, "fields": kind.fields, "replace": replace}
        if pipeline is not None:
            e["pipeline"] = pipeline.name if isinstance(pipeline, PipelineRef) else pipeline
        self._entries.append(e)
        return Ref(section, name)

    def source(self, name: str, kind: Kind, *, pipeline: Union[str, PipelineRef, None] = None,
               replace: bool = True) -> Ref:
        """Add or update source ``name`` (a ``flightline.kinds.Source*``).

        With ``replace`` (the default) the entry holds exactly the keys of
        ``kind``; otherwise the keys given are set and the others kept.
        ``pipeline`` also links it as that pipeline's source.
        """
        return self._entry("sources", name, kind, pipeline, replace)

    def sink(self, name: str, kind: Kind, *, pipeline: Union[str, PipelineRef, None] = None,
             replace: bool = True) -> Ref:
        """Add or update sink ``name`` (a ``flightline.kinds.Sink*``)."""
        return self._entry("sinks", name, kind, pipeline, replace)

    def deadletter_sink(self, name: str, kind: Kind, *, pipeline: Union[str, PipelineRef, None] = None,
                        replace: bool = True) -> Ref:
        """Add or update dead-letter sink ``name`` (a ``flightline.kinds.Sink*``)."""
        return self._entry("deadletter_sinks", name, kind, pipeline, replace)

    def schema_sink(self, name: str, kind: Kind, *, pipeline: Union[str, PipelineRef, None] = None,
                    replace: bool = True) -> Ref:
        """Add or update schema sink ``name`` (a ``flightline.kinds.SchemaSink*``)."""
        return self._entry("schema_sinks", name, kind, pipeline, replace)

    def pipeline(self, name: str, *, source: Union[Ref, str, None] = None, sink: Union[Ref, str, None] = None,
                 id: Optional[str] = None, deadletter_sink: Union[Ref, str, None] = None,
                 deadletter: Optional[str] = None, schema_sink: Union[Ref, str, None] = None,
                 stream: Optional[str] = None, target: Optional[str] = None, window: Optional[int] = None,
                 max_attempts: Optional[int] = None, plain_views: Optional[bool] = None,
                 transforms: Optional[Sequence[str]] = None) -> PipelineRef:
        """Add or update pipeline ``name``: the keys given are set, the
        others kept (docs/config.md, Pipelines)."""
        keys: Dict[str, Any] = {}
        for k, v in (("source", source), ("sink", sink), ("id", id), ("deadletter_sink", deadletter_sink),
                     ("deadletter", deadletter), ("schema_sink", schema_sink), ("stream", stream),
                     ("target", target), ("window", window), ("max_attempts", max_attempts),
                     ("plain_views", plain_views), ("transforms", transforms)):
            if v is None:
                continue
            if isinstance(v, Ref):
                v = str(v)
            elif isinstance(v, (list, tuple)):
                v = [str(x) for x in v]
            keys[k] = v
        self._pipelines.append({"name": name, "keys": keys})
        return PipelineRef(self, name)

    @property
    def pending(self) -> bool:
        """Whether there are edits not yet saved."""
        return bool(self._entries or self._pipelines)

    def _apply(self, *, dry_run: bool) -> ApplyResult:
        req = {"config": self.path, "dry_run": dry_run, "entries": self._entries, "pipelines": self._pipelines}
        p = _run(["config", "apply", "--json"], input=json.dumps(req))
        try:
            out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
        except json.JSONDecodeError:
            out = {}
        if p.returncode != 0:
            msg = out.get("error") or p.stderr.strip() or f"flightline config apply exited {p.returncode}"
            raise ConfigError(msg, reason=out.get("reason", "invalid"))
        return ApplyResult(out["path"], out["changed"], out["written"], out["incomplete_pipelines"], out["yaml"])

    def save(self, *, dry_run: bool = False) -> ApplyResult:
        """Apply the pending edits in one validated, atomic write (through
        ``flightline config apply --json``); ``dry_run`` only validates and
        returns the result.

        Raises:
            ConfigError: the edit or its result is refused; the file is left
                as it was. ``reason`` is ``plaintext_secret``, ``kind_change``,
                ``unknown`` or ``invalid``.
        """
        res = self._apply(dry_run=dry_run)
        if not dry_run:
            self._entries, self._pipelines = [], []
        return res

    def show(self) -> str:
        """``flightline config show``: the resolved file, secrets masked
        (every ``${VAR}`` must be set)."""
        p = _run(["config", "show", "--config", self.path])
        if p.returncode != 0:
            raise ConfigError(p.stderr.strip())
        return p.stdout


@dataclass(frozen=True)
class SyncResult:
    """What a ``flightline sync --once`` run did (its ``pipeline sync
    complete`` log line).

    Attributes:
        pipeline: the pipeline's name.
        rows, batches, bytes: what was written.
        seconds: wall time.
        checkpoint: the sink's checkpoint at the end.
        restarts: attempts that failed and were retried.
        dead_letters: records handed to the dead-letter path.
        events: every JSON log line of the run, parsed.
    """

    pipeline: str
    rows: int
    batches: int
    bytes: int
    seconds: float
    checkpoint: str
    restarts: int = 0
    dead_letters: int = 0
    events: List[dict] = field(default_factory=list, repr=False, compare=False)

    def __str__(self) -> str:
        return (f"{self.pipeline}: {self.rows} rows in {self.batches} batches, {self.seconds:.2f}s, "
                f"checkpoint {self.checkpoint}")


@dataclass(frozen=True)
class CheckResult:
    """What ``flightline check`` said: one line per endpoint.

    Attributes:
        ok: every endpoint answered.
        lines: its output lines (``ok …`` or ``FAIL …``).
    """

    ok: bool
    lines: List[str]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def _events(stderr: str) -> List[dict]:
    out = []
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def run_sync(config_path: str, pipeline: Optional[str], *, once: bool = True, timeout: Optional[float] = None,
             extra_args: Sequence[str] = (), env: Optional[Dict[str, str]] = None) -> List[SyncResult]:
    """Run ``flightline sync`` on a config file and turn its JSON log into
    results (one per pipeline that completed) or a :class:`PipelineError`."""
    args = ["sync", "--config", config_path, "--log-format", "json"]
    if pipeline:
        args += ["--pipeline", pipeline]
    if once:
        args += ["--once", "--progress", "none"]
    p = _run([*args, *extra_args], timeout=timeout, env=env)
    events = _events(p.stderr)
    if p.returncode != 0:
        errs = [e for e in events if e.get("level") == "ERROR"]
        last = errs[-1] if errs else None
        msg = (f"{last.get('msg')}: {last.get('err') or last.get('error') or ''}".rstrip(": ") if last
               else (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
        raise PipelineError(f"flightline sync failed: {msg}", returncode=p.returncode, events=events)
    results = []
    for e in events:
        if e.get("msg") == "pipeline sync complete":
            results.append(SyncResult(pipeline=e.get("pipeline", ""), rows=int(e.get("rows", 0)),
                                      batches=int(e.get("batches", 0)), bytes=int(e.get("bytes", 0)),
                                      seconds=float(e.get("wall", 0)) / 1e9, checkpoint=e.get("checkpoint", ""),
                                      restarts=int(e.get("restarts", 0)), dead_letters=int(e.get("dead_letters", 0)),
                                      events=events))
    return results


class Session:
    """Runs a pipeline of a config file with the engine (``flightline``).

    Args:
        pipeline: a :class:`PipelineRef`, or a pipeline's name.
        config: the config (default: the pipeline's, or ./flightline.yml).
    """

    def __init__(self, pipeline: Union[PipelineRef, str, None] = None,
                 config: Union[Config, str, os.PathLike, None] = None) -> None:
        if isinstance(pipeline, PipelineRef):
            config = config or pipeline.config
            pipeline = pipeline.name
        if isinstance(config, Config):
            if config.pending:
                raise ConfigError("the config has unsaved edits: call save() first")
            config = config.path
        self.config_path = os.fspath(config) if config is not None else DEFAULT_FILE
        self.pipeline = pipeline

    def sync(self, *, once: bool = True, timeout: Optional[float] = None) -> Union[SyncResult, List[SyncResult]]:
        """``flightline sync``: with ``once``, until the sink holds what the
        source held at the start, returning the result (a list when the
        session runs every pipeline of the file); without, until the process
        is stopped.

        Raises:
            PipelineError: the run failed; ``events`` holds its log.
        """
        results = run_sync(self.config_path, self.pipeline, once=once, timeout=timeout)
        if self.pipeline is not None and len(results) == 1:
            return results[0]
        return results

    def check(self, *, timeout: Optional[float] = None) -> CheckResult:
        """``flightline check``: load the file, then ask each endpoint one
        read-only question. Returns every line; ``ok`` is False on any
        failure (it never raises for an endpoint that failed)."""
        p = _run(["check", "--config", self.config_path], timeout=timeout)
        return CheckResult(ok=p.returncode == 0, lines=[ln for ln in p.stdout.splitlines() if ln.strip()])
