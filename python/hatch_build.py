"""Hatchling build hook: put the flightline binary into the wheel as a script.

The binary comes from, in order:

* ``FLIGHTLINE_BINARY``: a prebuilt file (e.g. a portable build made with
  ``zig cc``, see docs/python.md);
* ``FLIGHTLINE_BINARY=none``: none, on purpose (a pure-Python wheel);
* ``go build ./cmd/flightline`` in the Go module around this directory (a
  clone of the repository), with cgo as the Makefile builds it.

Without either (an sdist unpacked far from the Go sources, no Go), the
wheel is built without the binary and says so: ``flightline`` is then
looked up on PATH at run time (``FLIGHTLINE_BIN`` overrides it).

A wheel with the binary is tagged for the platform it was built for
(``py3-none-<platform>``); one without it is pure Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _platform_tag() -> str:
    # linux_x86_64 for a host build: a cgo binary needs the build host's
    # glibc, so a manylinux tag is auditwheel's (or a zig build's) to give,
    # through FLIGHTLINE_WHEEL_PLATFORM.
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


class GoBinaryHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        exe = "flightline.exe" if sys.platform == "win32" else "flightline"
        out_dir = os.path.join(self.root, "build", "bin")
        out = os.path.join(out_dir, exe)
        prebuilt = os.environ.get("FLIGHTLINE_BINARY")
        module = os.path.dirname(os.path.abspath(self.root))
        if prebuilt == "none":
            # A pure-Python wheel on purpose (tests point FLIGHTLINE_BIN at
            # a binary of their own).
            return
        if prebuilt:
            os.makedirs(out_dir, exist_ok=True)
            shutil.copyfile(prebuilt, out)
        elif os.path.exists(os.path.join(module, "go.mod")) and shutil.which("go"):
            os.makedirs(out_dir, exist_ok=True)
            env = {**os.environ, "CGO_ENABLED": os.environ.get("CGO_ENABLED", "1")}
            subprocess.check_call(
                ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/flightline"],
                cwd=module, env=env)
        else:
            self.app.display_warning(
                "flightline: no FLIGHTLINE_BINARY and no Go module with go on PATH: "
                "building a pure-Python wheel; the flightline binary must be on PATH")
            return
        os.chmod(out, 0o755)
        build_data["pure_python"] = False
        build_data["tag"] = "py3-none-" + os.environ.get("FLIGHTLINE_WHEEL_PLATFORM", _platform_tag())
        build_data["shared_scripts"][out] = exe
