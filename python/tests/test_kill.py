"""A Python pusher killed with SIGKILL at random moments, then run again,
lands every row once: checked from the sink's files, not through Flight."""

import os
import random
import signal
import subprocess
import sys
import time

from conftest import serve
from flightline.client import Sink, parse_positions
from test_client import read_dir

ROWS = 20000

PUSHER = r"""
import sys, time
import pyarrow as pa
from flightline.client import Sink

url, rows = sys.argv[1], int(sys.argv[2])
table = pa.table({"id": pa.array(range(rows), pa.int64()), "payload": [f"row-{i}" for i in range(rows)]})
sink = Sink(url, pipeline_id="py-kill", window=4)
r = sink.write_table(table, batch_rows=100)
print(r.rows, flush=True)
"""


def test_pusher_killed_and_rerun_lands_every_row_once(tmp_path):
    seed = int(os.environ.get("FLIGHTLINE_KILL_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    out = tmp_path / "out"
    script = tmp_path / "pusher.py"
    script.write_text(PUSHER)
    env = dict(os.environ)
    with serve(["serve-sink", "--sink", f"dir:{out}"]) as url:
        kills = 0
        after_kill = []
        for attempt in range(30):
            p = subprocess.Popen([sys.executable, str(script), url, str(ROWS)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if attempt < 6:
                # Kill once the sink holds a random number of rows (or at
                # once when the push has not started committing): mid-push
                # whatever the machine's speed.
                probe = Sink(url, pipeline_id="py-kill")
                done = parse_positions(probe.checkpoint).get("table/0", 0)
                threshold = done + rnd.randrange(1, max(2, (ROWS - done) // 4))
                while p.poll() is None:
                    if parse_positions(probe.checkpoint).get("table/0", 0) >= threshold:
                        break
                    time.sleep(0.002)
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                p.wait()
                after_kill.append(parse_positions(probe.checkpoint).get("table/0", 0))
                continue
            stdout, stderr = p.communicate(timeout=120)
            assert p.returncode == 0, stderr.decode()[-2000:]
            break
        mid = [n for n in after_kill if 0 < n < ROWS]
        assert len(mid) >= 3, f"too few kills landed mid-push: {after_kill} (seed {seed})"
        print(f"seed {seed}: rows committed at each kill: {after_kill}")
    got = read_dir(out)
    ids = got.column("id").to_pylist()
    assert len(ids) == ROWS, f"{len(ids)} rows for {ROWS} (seed {seed}, {kills} kills)"
    assert sorted(ids) == list(range(ROWS)), f"rows lost or repeated (seed {seed})"
    assert got.column("payload").to_pylist() == [f"row-{i}" for i in ids]
