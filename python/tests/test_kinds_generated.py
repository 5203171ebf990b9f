"""flightline/kinds.py is what tools/gen_kinds.py makes of the binary's
`config schema --json`: regenerate and diff."""

import json
import os
import subprocess
import sys

from flightline import find_flightline_bin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_kinds_module_is_current():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import gen_kinds
    finally:
        sys.path.pop(0)
    schema = json.loads(subprocess.check_output([find_flightline_bin(), "config", "schema", "--json"]))
    want = gen_kinds.generate(schema)
    with open(os.path.join(ROOT, "src", "flightline", "kinds.py")) as f:
        have = f.read()
    assert have == want, ("src/flightline/kinds.py is stale: "
                          "python python/tools/gen_kinds.py > python/src/flightline/kinds.py")


def test_every_kind_has_a_class():
    from flightline.kinds import KINDS

    schema = json.loads(subprocess.check_output([find_flightline_bin(), "config", "schema", "--json"]))
    for section, kinds in schema["sections"].items():
        for kind in kinds:
            cls = KINDS[(section, kind)]
            assert cls.kind == kind
