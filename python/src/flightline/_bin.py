"""Finding the flightline binary (as ruff's and uv's find_bin do)."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

__all__ = ["find_flightline_bin"]


def _script_dirs() -> list[str]:
    dirs = [sysconfig.get_path("scripts")]
    # pip install --user puts scripts in the user scheme.
    user = "nt_user" if os.name == "nt" else ("osx_framework_user" if sys.platform == "darwin" and sys._framework else "posix_user")  # type: ignore[attr-defined]
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=user))
    except KeyError:
        pass
    # The interpreter's own directory (a venv's bin/), and the base prefix.
    dirs.append(os.path.dirname(sys.executable))
    dirs.append(os.path.join(sys.base_prefix, "Scripts" if os.name == "nt" else "bin"))
    # pip install --target DIR: DIR/bin next to DIR/flightline.
    pkg = os.path.dirname(os.path.abspath(__file__))
    dirs.append(os.path.join(os.path.dirname(pkg), "bin"))
    return dirs


def find_flightline_bin() -> str:
    """Return the path of the flightline binary.

    Looked up in order: the ``FLIGHTLINE_BIN`` environment variable, the
    scripts directory the wheel installed it into (the environment's, the
    user scheme's, the interpreter's, ``--target``'s), then ``PATH``.

    Raises:
        FileNotFoundError: when none has it.
    """
    env = os.environ.get("FLIGHTLINE_BIN")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"FLIGHTLINE_BIN={env!r} is not a file")
        return env
    exe = "flightline.exe" if os.name == "nt" else "flightline"
    for d in _script_dirs():
        if d:
            p = os.path.join(d, exe)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    found = shutil.which(exe)
    if found:
        return found
    raise FileNotFoundError(
        "the flightline binary was not found: install a wheel that ships it, "
        "put it on PATH, or set FLIGHTLINE_BIN")
