"""``python -m flightline ARGS``: run the flightline binary with ARGS."""

from __future__ import annotations

import os
import sys

from ._bin import find_flightline_bin


def main() -> None:
    exe = find_flightline_bin()
    if os.name == "nt":
        import subprocess

        sys.exit(subprocess.call([exe, *sys.argv[1:]]))
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
