"""Flightline for Python.

Three layers, each usable alone:

* :mod:`flightline.client`: an exactly-once client over ``pyarrow.flight``
  for Flightline sinks and sources (docs/protocol.md): push Arrow from a
  Python program, read a source after a checkpoint.
* :mod:`flightline.config`: build and edit ``flightline.yml`` (``Config``,
  ``EnvRef``, typed kinds generated from the binary's own declarations) and
  run its pipelines (``Session``). Edits go through the binary's merge
  writer, so Python and ``flightline connect`` cannot disagree.
* :mod:`flightline.pipelines`: the seeds' pipeline API (``DeltaSink``,
  ``kafka_to_delta``, …): a pipeline is a generated config that the Go
  engine (``flightline sync``) runs; :mod:`flightline.transform` serves a
  Python function (Arrow or polars) as a transform between its stages.

The engine is the ``flightline`` binary the wheel ships as a script
(:func:`find_flightline_bin`); nothing of it runs inside this interpreter.
"""

from ._bin import find_flightline_bin
from .errors import FlightlineError

__version__ = "0.1.0"

__all__ = ["find_flightline_bin", "FlightlineError", "__version__"]
