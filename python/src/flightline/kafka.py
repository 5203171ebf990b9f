"""Kafka consumer settings in the shape of the seeds' API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

from ._kindbase import EnvRef

__all__ = ["KafkaConsumerConfig"]


@dataclass
class KafkaConsumerConfig:
    """Where and how a pipeline reads Kafka.

    Args:
        bootstrap_servers: ``HOST:PORT`` (comma-separated) or a list of them.
        topics: the topics to read; a pipeline reads one stream, so give one
            topic per pipeline.
        group_id: the consumer group (default: the pipeline id). Offsets are
            committed to it for lag dashboards only: a pipeline resumes from
            the sink's checkpoint.
        auto_offset_reset: ``earliest`` or ``latest``, where a partition
            without a position starts.
        security_protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or
            ``SASL_SSL``.
        sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        sasl_username: the SASL user.
        sasl_password: an :class:`~flightline.config.EnvRef` naming the
            variable that holds the password (never the password itself).
        ssl_cafile: CA file to verify the brokers.
        options: further keys of the kafka source (docs/config.md), e.g.
            ``{"batch_rows": 50000}``.
    """

    bootstrap_servers: Union[str, Sequence[str]]
    topics: List[str]
    group_id: Optional[str] = None
    auto_offset_reset: str = "earliest"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: Optional[str] = None
    sasl_username: Optional[str] = None
    sasl_password: Optional[EnvRef] = None
    ssl_cafile: Optional[str] = None
    options: Dict[str, object] = field(default_factory=dict)

    def fields(self) -> Dict[str, object]:
        """The kafka source's keys for these settings."""
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset={self.auto_offset_reset!r}: want earliest or latest")
        brokers = self.bootstrap_servers
        f: Dict[str, object] = {
            "brokers": [b.strip() for b in brokers.split(",")] if isinstance(brokers, str) else list(brokers),
            "topics": list(self.topics),
            "reset": self.auto_offset_reset,
        }
        if self.group_id:
            f["group"] = self.group_id
        proto = self.security_protocol.upper()
        if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"security_protocol={self.security_protocol!r}")
        if proto in ("SSL", "SASL_SSL"):
            f["tls"] = True
        if self.ssl_cafile:
            f["tls_ca"] = self.ssl_cafile
        if proto.startswith("SASL"):
            if not self.sasl_mechanism:
                raise ValueError(f"security_protocol={proto} needs sasl_mechanism")
            f["sasl"] = self.sasl_mechanism.lower()
            if self.sasl_username:
                f["user"] = self.sasl_username
            if self.sasl_password is not None:
                if not isinstance(self.sasl_password, EnvRef):
                    from .errors import PlaintextSecretError

                    raise PlaintextSecretError("sasl_password is a secret: give EnvRef(\"VAR\") (the value is not shown)")
                f["password_env"] = self.sasl_password.name
        f.update(self.options)
        return f
