"""fakesnow's HTTP server, plus what Snowflake does with a dead client's
transaction.

A client killed inside a transaction leaves it open. Snowflake rolls such a
"detached" transaction back once its session times out (four hours by
default, shorter with a session policy); fakesnow keeps it forever, and with
it DuckDB's write conflicts on every row it changed, so the next writer of a
checkpoint row fails until the emulator restarts. This wrapper rolls back
the open transaction of a session that has had no request in flight for
--idle seconds, and ends that session (a client that comes back is told
to log in again: its COMMIT fails). It also rolls back the open
transaction of a session its client closes, as Snowflake does (fakesnow
only forgets the session, and the transaction stayed until Python's
garbage collector freed it), once the session's requests still running
have ended. And it runs a query request id once per session, as Snowflake
does: gosnowflake resends a statement whose request timed out or got a 5xx
answer with the same requestId, and fakesnow ran it again (a COPY resent
inside a transaction loaded its file twice); a resend now waits for the
first run and gets its answer. And it keeps what SHOW TRANSACTIONS and
SYSTEM$ABORT_TRANSACTION need, which fakesnow has not: each session's open
explicit transaction (BEGIN [WORK | TRANSACTION] [NAME name]; COMMIT and
ROLLBACK end it) with an id, its name (a UUID when unnamed, as Snowflake
gives), session and start; SHOW TRANSACTIONS lists them (columns id, user,
session, name, started_on, state, scope, as Snowflake's); SELECT
SYSTEM$ABORT_TRANSACTION(id) rolls one back and ends its session, as the
idle roll-back does (once the session's requests still running have
ended). Everything else is fakesnow as installed.

With --db-path DIR, the databases live in DuckDB files under DIR instead of
in memory (fakesnow's own db_path), and so do fakesnow's global catalog
(stages, file formats: DIR/_fs_global.db) and the staged files
(DIR/bucket), so a server killed and restarted on the same DIR keeps its
tables and stages, as Snowflake does: the Snowflake service-fault test
does that.

With --trace FILE, every statement a session runs is written to FILE, one
line at its start and one at its end (time, session, thread, outcome, SQL),
and so are logins, session closes and idle roll-backs: the order in which
the emulator ran what clients sent, for diagnosing a failed test.

usage: fakesnow_server.py -p PORT [--host 127.0.0.1] [--idle 20] [--db-path DIR] [--trace FILE]
"""
import argparse
import asyncio
import collections
import datetime
import gzip
import json
import os
import re
import signal
import sys
import threading
import time
import uuid

import importlib

import fakesnow
import fakesnow.instance
from fakesnow import info_schema
from fakesnow.cursor import FakeSnowflakeCursor
from fakesnow.transforms import show, stage
from starlette.requests import Request
from starlette.routing import request_response

# fakesnow.server is both a function of the package (start the server) and
# its submodule (the app and the sessions); take the function first.
serve = fakesnow.server
srv = importlib.import_module("fakesnow.server")

lock = threading.Lock()
last: dict[str, float] = {}  # token → monotonic time of the last request end
inflight: dict[str, int] = {}  # token → requests running


trace_file = None
trace_lock = threading.Lock()


def trace(msg: str) -> None:
    if trace_file is None:
        return
    line = f"{time.time():.6f} {threading.get_ident() % 100000:05d} {msg}\n"
    with trace_lock:
        trace_file.write(line)
        trace_file.flush()


names: dict[int, str] = {}  # id(session) → its token's first characters


def session_name(conn) -> str:
    """A short stable name of a session: its token's first characters."""
    if (n := names.get(id(conn))) is not None:
        return n
    for tok, c in list(srv.sessions.items()):
        if c is conn:
            names[id(c)] = tok[:8]
            return tok[:8]
    return f"?{id(conn) % 100000:05d}"


def install_trace(path: str) -> None:
    global trace_file
    trace_file = open(path, "a", buffering=1)
    execute = FakeSnowflakeCursor.execute

    def traced(self, command, *args, **kwargs):
        who = session_name(self._conn)
        sql = " ".join(str(command).split())[:240]
        trace(f"{who} start {sql}")
        try:
            out = execute(self, command, *args, **kwargs)
        except BaseException as e:
            trace(f"{who} error {type(e).__name__}: {' '.join(str(e).split())[:200]} | {sql[:80]}")
            raise
        trace(f"{who} done rows={getattr(self, '_rowcount', None)} | {sql[:80]}")
        return out

    FakeSnowflakeCursor.execute = traced
    login = srv.login_request

    async def traced_login(request):
        before = set(srv.sessions)
        resp = await login(request)
        for tok in set(srv.sessions) - before:
            names[id(srv.sessions[tok])] = tok[:8]
            trace(f"{tok[:8]} login")
        return resp

    for r in srv.app.routes:
        if r.path == "/session/v1/login-request":
            r.app = request_response(traced_login)


closing: dict[str, object] = {}  # token → a closed session with requests still running


def end_session(tok: str, conn) -> None:
    """Roll back a closed session's open transaction and close its DuckDB
    connection (fakesnow only forgets the session: its transaction, and
    with it DuckDB's write conflicts on every row it touched, stayed until
    Python's garbage collector happened to free the connection)."""
    try:
        conn._duck_conn.execute("ROLLBACK")
        trace(f"{tok[:8]} close-rollback")
    except Exception:
        pass  # no transaction open
    try:
        conn._duck_conn.close()
    except Exception:
        pass


def install_close() -> None:
    """Closing a session rolls back its open transaction, as Snowflake does,
    once the session's requests still running have ended (a statement its
    client gave up on still runs to its end here; rolling back under it
    would let the rest of it run in autocommit)."""
    session = srv.session

    async def closing_session(request):
        tok = request.headers.get("Authorization", "")[17:-1]
        conn = srv.sessions.get(tok)
        resp = await session(request)
        if request.query_params.get("delete") and conn is not None and tok not in srv.sessions:
            trace(f"{tok[:8]} close")
            with lock:
                if inflight.get(tok, 0) > 1:  # this request is one
                    closing[tok] = conn
                    return resp
            end_session(tok, conn)
        return resp

    for r in srv.app.routes:
        if r.path == "/session":
            r.app = request_response(closing_session)


class Once:
    """One run of a query request id: its answer, once it has one."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.response = None


BEGIN_RE = re.compile(r"^\s*BEGIN(?:\s+(?:WORK|TRANSACTION))?(?:\s+NAME\s+([A-Za-z_][A-Za-z0-9_$]*))?\s*;?\s*$", re.I)
END_RE = re.compile(r"^\s*(?:COMMIT|ROLLBACK)(?:\s+WORK)?\s*;?\s*$", re.I)
SHOW_RE = re.compile(r"^\s*SHOW\s+TRANSACTIONS\s*;?\s*$", re.I)
ABORT_RE = re.compile(r"^\s*SELECT\s+SYSTEM\$ABORT_TRANSACTION\s*\(\s*(-?\d+)\s*\)\s*;?\s*$", re.I)

txns: dict[str, dict] = {}  # token → its open explicit transaction
session_ids: dict[str, int] = {}  # token → a numeric session id
next_id = [1764000000000000000]  # transaction and session ids, 19 digits as Snowflake's


def new_id() -> int:
    next_id[0] += 1
    return next_id[0]


def sql_literal(v) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def show_transactions() -> str:
    """SHOW TRANSACTIONS as a SELECT of the open transactions of the
    sessions still alive."""
    with lock:
        alive = [(tok, t) for tok, t in txns.items() if tok in srv.sessions]
    cols = ('{id} AS "id", {user} AS "user", {session} AS "session", {name} AS "name", '
            'CAST({started} AS TIMESTAMP_LTZ) AS "started_on", \'running\' AS "state", 0 AS "scope"')
    if not alive:
        return "SELECT " + cols.format(id=0, user="''", session=0, name="''", started="'1970-01-01 00:00:00+00:00'") + " WHERE 1 = 0"
    return " UNION ALL ".join(
        "SELECT " + cols.format(id=t["id"], user=sql_literal("FAKE"), session=session_ids.get(tok, 0),
                                name=sql_literal(t["name"]), started=sql_literal(t["started"]))
        for tok, t in alive)


def abort_transaction(tid: int) -> str:
    """SYSTEM$ABORT_TRANSACTION: roll back the transaction and end its
    session (its client's next request is refused instead of running in
    autocommit what was meant for the transaction), once the session's
    requests still running have ended."""
    with lock:
        tok = next((k for k, t in txns.items() if t["id"] == tid), None)
        if tok is None:
            return f"Transaction {tid} not found."
        txns.pop(tok, None)
        conn = srv.sessions.pop(tok, None)
        if conn is None:
            return f"Transaction {tid} not found."
        if inflight.get(tok, 0) > 0:
            closing[tok] = conn
            conn = None
    if conn is not None:
        end_session(tok, conn)
    trace(f"{tok[:8]} aborted transaction {tid}; session ended")
    print(f"fakesnow_server: aborted transaction {tid} and ended its session", file=sys.stderr, flush=True)
    return f"Aborted transaction {tid}."


async def transactions(request, tok: str):
    """The request, rewritten where it is about transactions (see the
    module's documentation), and what to do once it has run."""
    body = await request.body()
    if request.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    try:
        msg = json.loads(body)
        sql = msg["sqlText"]
    except Exception:
        return request, None
    after = None
    if m := BEGIN_RE.match(sql):
        with lock:
            if tok not in txns:
                session_ids.setdefault(tok, new_id())
                txns[tok] = {"id": new_id(), "name": m.group(1).upper() if m.group(1) else str(uuid.uuid4()),
                             "started": datetime.datetime.now(datetime.timezone.utc).isoformat(sep=" ")}
        new = "BEGIN"
    elif END_RE.match(sql):
        def after():
            with lock:
                txns.pop(tok, None)
        return request, after
    elif SHOW_RE.match(sql):
        new = show_transactions()
    elif m := ABORT_RE.match(sql):
        new = "SELECT " + sql_literal(abort_transaction(int(m.group(1))))
    else:
        return request, None
    if new == sql:
        return request, after
    trace(f"{tok[:8]} rewrote {' '.join(sql.split())[:80]} as {new[:160]}")
    msg["sqlText"] = new
    data = json.dumps(msg).encode()
    scope = dict(request.scope)
    scope["headers"] = [(k, v) for k, v in request.scope["headers"] if k not in (b"content-encoding", b"content-length")]
    scope["headers"].append((b"content-length", str(len(data)).encode()))

    async def receive():
        return {"type": "http.request", "body": data, "more_body": False}

    return Request(scope, receive), after


ONCE_KEEP = 1024  # request ids remembered (the oldest are forgotten)
once: "collections.OrderedDict[tuple[str, str], Once]" = collections.OrderedDict()


def install_request_once() -> None:
    """Run each (session, requestId) of a query request once: a resend of
    one that is running waits for it, a resend of one that ended gets its
    answer, as Snowflake answers a retried request id with the original
    query's outcome."""
    query = srv.query_request

    async def query_once(request):
        rid = request.query_params.get("requestId")
        tok = request.headers.get("Authorization", "")[17:-1]
        if not rid or not tok:
            return await query(request)
        key = (tok, rid)
        first = once.get(key)
        if first is not None:
            trace(f"{tok[:8]} resend of request {rid} (retry {request.query_params.get('retryCount')}): "
                  f"{'waiting for' if not first.done.is_set() else 'answered by'} the first run")
            await first.done.wait()
            if first.response is not None:
                return first.response
            return await query(request)  # the first run raised: no answer
        mine = once[key] = Once()
        while len(once) > ONCE_KEEP:
            once.popitem(last=False)
        request, after = await transactions(request, tok)
        try:
            mine.response = await query(request)
        except BaseException:
            once.pop(key, None)  # no answer to give: a resend runs it
            raise
        finally:
            mine.done.set()
            if after is not None:
                after()
        return mine.response

    for r in srv.app.routes:
        if r.path == "/queries/v1/query-request":
            r.app = request_response(query_once)


def token_of(scope) -> str | None:
    for k, v in scope.get("headers", []):
        if k == b"authorization":
            return v.decode("latin-1")[17:-1]
    return None


class Activity:
    """ASGI middleware recording each session's requests."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        tok = token_of(scope) if scope["type"] == "http" else None
        if tok is None:
            return await self.app(scope, receive, send)
        with lock:
            inflight[tok] = inflight.get(tok, 0) + 1
        try:
            return await self.app(scope, receive, send)
        finally:
            with lock:
                inflight[tok] -= 1
                last[tok] = time.monotonic()
                done = closing.pop(tok) if inflight[tok] == 0 and tok in closing else None
            if done is not None:
                end_session(tok, done)


def reap(idle: float, stop: threading.Event) -> None:
    """Once a session has been idle for idle seconds, roll back its open
    transaction, if it has one (fakesnow's own flag is not kept for explicit
    BEGINs in autocommit sessions, so ask DuckDB: a ROLLBACK without a
    transaction fails). Each idle period is tried once."""
    tried: dict[str, float] = {}  # token → the last[] value already tried
    while not stop.wait(1.0):
        now = time.monotonic()
        for tok, conn in list(srv.sessions.items()):
            with lock:
                seen = last.get(tok)
                if seen is None or inflight.get(tok, 0) > 0 or now - seen < idle or tried.get(tok) == seen:
                    continue
                tried[tok] = seen
                try:
                    conn._duck_conn.execute("ROLLBACK")
                except Exception:
                    continue  # no transaction open
                # The session expires with its transaction, as on
                # Snowflake: its client's next request is refused, instead
                # of running in autocommit what was meant for the
                # transaction.
                srv.sessions.pop(tok, None)
                try:
                    conn._duck_conn.close()
                except Exception:
                    pass
            print(f"fakesnow_server: rolled back the open transaction of a session idle for {now - seen:.0f}s, and ended the session",
                  file=sys.stderr, flush=True)
            trace(f"{tok[:8]} idle-rollback after {now - seen:.1f}s; session ended")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("-p", "--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--idle", type=float, default=20.0)
    p.add_argument("--db-path", default=None)
    p.add_argument("--trace", default=None)
    a = p.parse_args()
    if a.trace:
        install_trace(a.trace)
    install_close()
    install_request_once()
    if a.db_path:
        # Sessions log in to the module's shared instance; its global
        # catalog is attached in memory: move it to a file (the creation
        # statements are all IF NOT EXISTS).
        fs = fakesnow.instance.FakeSnow(db_path=a.db_path)
        g = fakesnow.instance.GLOBAL_DATABASE_NAME
        fs.duck_conn.execute(f"DETACH {g}")
        fs.duck_conn.execute(f"ATTACH '{os.path.join(a.db_path, g + '.db')}' AS {g}")
        fs.duck_conn.execute(info_schema.fs_global_creation_sql())
        fs.duck_conn.execute(show.fs_global_creation_sql())
        srv.shared_fs = fs
        stage.LOCAL_BUCKET_PATH = os.path.join(a.db_path, "bucket")
        os.makedirs(stage.LOCAL_BUCKET_PATH, exist_ok=True)
    srv.app.add_middleware(Activity)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=reap, args=(a.idle, stop), daemon=True).start()
    with serve(port=a.port, host=a.host):
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
