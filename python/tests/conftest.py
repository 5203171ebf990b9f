import contextlib
import os
import socket
import subprocess
import sys
import time

import pytest

from flightline import find_flightline_bin


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def flightline_bin() -> str:
    return find_flightline_bin()


@contextlib.contextmanager
def serve(args, *, timeout=20.0):
    """Run `flightline ARGS --listen 127.0.0.1:PORT`; yield grpc://…"""
    port = free_port()
    p = subprocess.Popen([find_flightline_bin(), *args, "--listen", f"127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if p.poll() is not None:
                raise RuntimeError(f"flightline {args[0]} exited {p.returncode}: {p.stderr.read().decode()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"flightline {args[0]} did not listen")
            time.sleep(0.05)
        yield f"grpc://127.0.0.1:{port}"
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def require_services() -> bool:
    return os.environ.get("FLIGHTLINE_REQUIRE_SERVICES") == "1"


def service(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        if require_services():
            pytest.fail(f"{name} is not set and FLIGHTLINE_REQUIRE_SERVICES=1")
        pytest.skip(f"{name} is not set (start the services: integration/services/services.sh up kafka)")
    return v
