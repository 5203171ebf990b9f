"""find_flightline_bin: FLIGHTLINE_BIN, then the scripts directory, then PATH."""

import os
import stat

import pytest

from flightline._bin import find_flightline_bin


def test_env_wins(tmp_path, monkeypatch):
    exe = tmp_path / "flightline"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FLIGHTLINE_BIN", str(exe))
    assert find_flightline_bin() == str(exe)
    monkeypatch.setenv("FLIGHTLINE_BIN", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="FLIGHTLINE_BIN"):
        find_flightline_bin()


def test_path_is_last(tmp_path, monkeypatch):
    monkeypatch.delenv("FLIGHTLINE_BIN", raising=False)
    monkeypatch.setattr("flightline._bin._script_dirs", lambda: [str(tmp_path / "none")])
    exe = tmp_path / "flightline"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_flightline_bin() == str(exe)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="not found"):
        find_flightline_bin()
