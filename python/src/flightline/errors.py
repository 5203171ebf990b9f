"""The exceptions of the package, one per gRPC code of docs/protocol.md.

``pyarrow.flight`` raises its own exception types, which merge several
gRPC codes (ABORTED and INTERNAL are both ``FlightInternalError``); the
client turns them into these by the code pyarrow writes into the message,
so callers can branch on the type: :attr:`FlightlineError.retryable` says
whether resuming from the sink's checkpoint may succeed.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = [
    "FlightlineError", "InvalidArgument", "Fenced", "Precondition", "CheckpointMoved",
    "Unavailable", "Unauthenticated", "PermissionDenied", "NotFound", "ResourceExhausted",
    "InternalBug", "Internal", "AckMismatch", "PlaintextSecretError", "ConfigError",
    "SchemaMappingError", "PipelineError", "from_flight_error",
]


class FlightlineError(Exception):
    """Base of every error of this package.

    Attributes:
        code: the gRPC code (``"ABORTED"``, …) when the error came over the
            wire, else ``None``.
        retryable: whether re-reading the checkpoint and resuming may
            succeed (the protocol's "what to do").
    """

    code: Optional[str] = None
    retryable = False

    def __init__(self, message: str, *, code: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(FlightlineError, ValueError):
    """INVALID_ARGUMENT: a malformed batch, checkpoint or name, or a schema
    mismatch. Fix the input; retrying it as is fails the same way."""

    code = "INVALID_ARGUMENT"


class Fenced(FlightlineError):
    """FAILED_PRECONDITION: a newer writer of the same pipeline took over;
    this one must stop writing."""

    code = "FAILED_PRECONDITION"


class Precondition(FlightlineError):
    """FAILED_PRECONDITION with reason PRECONDITION: the destination is of a
    kind the endpoint cannot use (a view, a managed table). Change it."""

    code = "FAILED_PRECONDITION"


class CheckpointMoved(FlightlineError):
    """ABORTED: the pipeline's checkpoint moved since it was read. Re-read
    it and resume."""

    code = "ABORTED"
    retryable = True


class Unavailable(FlightlineError, ConnectionError):
    """UNAVAILABLE: the endpoint or its destination cannot take the call now.
    Back off, then resume from the checkpoint."""

    code = "UNAVAILABLE"
    retryable = True


class Unauthenticated(FlightlineError, PermissionError):
    """UNAUTHENTICATED: a missing or wrong token or client certificate."""

    code = "UNAUTHENTICATED"


class PermissionDenied(FlightlineError, PermissionError):
    """PERMISSION_DENIED: valid credentials without the grant."""

    code = "PERMISSION_DENIED"


class NotFound(FlightlineError, LookupError):
    """NOT_FOUND: an unknown stream or target."""

    code = "NOT_FOUND"


class ResourceExhausted(FlightlineError):
    """RESOURCE_EXHAUSTED: a message larger than the endpoint accepts; send
    smaller batches."""

    code = "RESOURCE_EXHAUSTED"


class InternalBug(FlightlineError):
    """INTERNAL with reason INTERNAL_BUG: the endpoint hit a bug; nothing was
    committed. Retrying the same input hits it again."""

    code = "INTERNAL"


class Internal(FlightlineError):
    """INTERNAL without a reason (or another unclassified code): retry with
    backoff."""

    code = "INTERNAL"
    retryable = True


class AckMismatch(FlightlineError):
    """The sink acknowledged a checkpoint other than the one sent next: the
    endpoint broke the protocol. Do not retry."""


class PlaintextSecretError(FlightlineError, ValueError):
    """A secret key was given a plain value: write it as ``EnvRef("VAR")``."""


class ConfigError(FlightlineError, ValueError):
    """The config file, or an edit of it, was refused (by the binary's own
    loader and merge writer).

    Attributes:
        reason: ``plaintext_secret``, ``kind_change``, ``unknown`` or
            ``invalid``.
    """

    def __init__(self, message: str, *, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


class SchemaMappingError(FlightlineError, TypeError):
    """A field of a model has a type the value schema cannot express.

    Attributes:
        field: the dotted path of the field.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class PipelineError(FlightlineError):
    """``flightline sync`` failed.

    Attributes:
        returncode: the process's exit status.
        events: the JSON log lines it wrote, parsed.
    """

    def __init__(self, message: str, *, returncode: int, events: list) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.events = events


_CODE = re.compile(r"debug context: ([A-Z_]+):")
_PHRASES = {
    "invalid argument": "INVALID_ARGUMENT", "precondition failed": "FAILED_PRECONDITION",
    "aborted": "ABORTED", "unavailable": "UNAVAILABLE", "unauthenticated": "UNAUTHENTICATED",
    "permission denied": "PERMISSION_DENIED", "unauthorized": "PERMISSION_DENIED",
    "not found": "NOT_FOUND", "resource exhausted": "RESOURCE_EXHAUSTED", "internal": "INTERNAL",
}
_RETURNED = re.compile(r"(?:gRPC|Flight) returned ([a-z ]+?) error")


def _code_of(exc: BaseException) -> str:
    text = str(exc)
    m = _CODE.search(text)
    if m:
        return m.group(1)
    m = _RETURNED.search(text)
    if m and m.group(1) in _PHRASES:
        return _PHRASES[m.group(1)]
    import pyarrow.flight as flight

    for typ, code in ((flight.FlightUnavailableError, "UNAVAILABLE"),
                      (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
                      (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
                      (flight.FlightTimedOutError, "UNAVAILABLE")):
        if isinstance(exc, typ):
            return code
    return "INTERNAL"


def _message(exc: BaseException) -> str:
    text = str(exc)
    _, sep, rest = text.partition("with message: ")
    if sep:
        text = rest
    return text.split(". gRPC client debug context:")[0].strip()


def from_flight_error(exc: BaseException) -> FlightlineError:
    """The FlightlineError for an exception raised by pyarrow.flight."""
    code, msg = _code_of(exc), _message(exc)
    if code == "INVALID_ARGUMENT":
        return InvalidArgument(msg)
    if code == "FAILED_PRECONDITION":
        # pyarrow does not expose the status's ErrorInfo: the fencing
        # error names itself.
        return Fenced(msg) if "fenced" in msg else Precondition(msg)
    if code == "ABORTED":
        return CheckpointMoved(msg)
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return Unavailable(msg, code=code)
    if code == "UNAUTHENTICATED":
        return Unauthenticated(msg)
    if code == "PERMISSION_DENIED":
        return PermissionDenied(msg)
    if code == "NOT_FOUND":
        return NotFound(msg)
    if code == "RESOURCE_EXHAUSTED":
        return ResourceExhausted(msg)
    if code == "INTERNAL" and "INTERNAL_BUG" in str(exc):
        return InternalBug(msg)
    return Internal(msg, code=code)
