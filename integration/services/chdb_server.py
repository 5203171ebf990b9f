"""A small ClickHouse HTTP front on chdb, for Flightline's ClickHouse sink tests.

No current ClickHouse server installs on the test machine; chdb (PyPI) is
ClickHouse 26.9 as a library, with no listener of its own. This script
serves the subset of ClickHouse's HTTP interface
(https://clickhouse.com/docs/interfaces/http) that flightsink/clickhouse
uses, over one chdb session whose data lives under --path:

  GET  /ping                       -> "Ok.\n"
  GET  /?query=SQL                 -> the result, in the query's FORMAT
  POST /?query=SQL  body=data      -> an INSERT … FORMAT ArrowStream with
                                      the Arrow IPC stream as its data
  POST /            body=SQL       -> the SQL (when there is no query param)

Every other URL parameter is a ClickHouse setting for that one request
(`database` sets the current database; `insert_deduplication_token`,
`wait_end_of_query`, … are SET for the request and reset afterwards),
except `user`/`password`, which authenticate like the headers below.

Authentication: HTTP basic auth, or X-ClickHouse-User / X-ClickHouse-Key,
or user/password parameters, checked against --user/--password. A wrong
one gets HTTP 403 with X-ClickHouse-Exception-Code: 516 and ClickHouse's
text ("Code: 516. DB::Exception: …: Authentication failed …
(AUTHENTICATION_FAILED)"), as a ClickHouse server answers.

Errors: HTTP 500 (404 for an unknown table, 400 for a syntax error, as
ClickHouse does for those codes), X-ClickHouse-Exception-Code: the code, and
the exception text as the body.

What differs from a ClickHouse server (and so what the sink's tests do
not cover): the INSERT's data is written to a temporary file and run as
`INSERT INTO t [(cols)] SELECT * FROM file(tmp, 'ArrowStream')` — columns by
position (the sink always names the batch's columns in its order), the
same ArrowStream input format and the same block formation a server's
INSERT … FORMAT ArrowStream uses is not guaranteed; requests run one at a
time (one chdb session, a lock); no sessions, no compression (bodies plain or chunked), no
progress headers, no X-ClickHouse-Summary; the query must be complete in
the URL for an INSERT (the sink's always is).

usage: chdb_server.py -p PORT [--host 127.0.0.1] --path DIR [--user U --password P]
"""
import argparse
import base64
import os
import re
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from chdb import session as chsession

INSERT_RE = re.compile(
    r"^\s*INSERT\s+INTO\s+(?P<target>.+?)\s*(?:SETTINGS\s+(?P<settings>.+?)\s*)?FORMAT\s+ArrowStream\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
CODE_RE = re.compile(r"Code:\s*(\d+)")
SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Parameters that are not settings.
NOT_SETTINGS = {"query", "user", "password", "database", "default_format", "query_id", "session_id",
                "wait_end_of_query", "buffer_size", "compress", "decompress", "enable_http_compression"}

lock = threading.Lock()
sess = None
args = None


def quote(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # quiet; errors are logged below
        pass

    def reply(self, status: int, body: bytes, code: int | None = None, ctype="text/plain; charset=UTF-8"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if code is not None:
            self.send_header("X-ClickHouse-Exception-Code", str(code))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, code: int, text: str):
        status = {516: 403, 60: 404, 81: 404, 62: 400}.get(code, 500)
        self.reply(status, (text.rstrip() + "\n").encode(), code)

    def authenticated(self, params) -> bool:
        user, pw = params.get("user"), params.get("password")
        if self.headers.get("X-ClickHouse-User") is not None:
            user, pw = self.headers.get("X-ClickHouse-User"), self.headers.get("X-ClickHouse-Key", "")
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                u, _, p = base64.b64decode(auth[6:]).decode().partition(":")
                user, pw = u, p
            except Exception:
                return False
        user = user or "default"
        pw = pw or ""
        return user == args.user and pw == args.password

    def do_GET(self):
        self.handle_req(b"")

    def do_POST(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = self.read_chunked()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
        self.handle_req(body)

    def read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():  # trailers
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def handle_req(self, body: bytes):
        url = urlsplit(self.path)
        if url.path == "/ping":
            self.reply(200, b"Ok.\n")
            return
        if url.path != "/":
            self.fail(0, f"Code: 0. DB::Exception: no handler for {url.path}. (UNKNOWN)")
            return
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        if not self.authenticated(params):
            user = self.headers.get("X-ClickHouse-User") or params.get("user") or "default"
            self.fail(516, f"Code: 516. DB::Exception: {user}: Authentication failed: password is incorrect, "
                           "or there is no user with such name. (AUTHENTICATION_FAILED)")
            return
        query = params.get("query")
        data = None
        if query is None:
            query, body = body.decode(), b""
        elif body:
            data = body
        settings = {k: v for k, v in params.items() if k not in NOT_SETTINGS}
        for k in settings:
            if not SETTING_NAME.match(k):
                self.fail(115, f"Code: 115. DB::Exception: Unknown setting '{k}'. (UNKNOWN_SETTING)")
                return
        fmt = params.get("default_format", "TabSeparated")
        tmp = None
        try:
            if data is not None:
                m = INSERT_RE.match(query)
                if not m:
                    self.fail(62, "Code: 62. DB::Exception: this front takes data only for "
                                  "INSERT INTO t [(cols)] FORMAT ArrowStream. (SYNTAX_ERROR)")
                    return
                fd, tmp = tempfile.mkstemp(suffix=".arrows", dir=args.tmp)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                s = f" SETTINGS {m.group('settings')}" if m.group("settings") else ""
                query = f"INSERT INTO {m.group('target')}{s} SELECT * FROM file({quote(tmp)}, 'ArrowStream')"
            with lock:
                out = self.run(query, fmt, params.get("database"), settings)
        except Exception as e:  # chdb raises ChdbError with ClickHouse's text
            text = str(e)
            m = CODE_RE.search(text)
            self.fail(int(m.group(1)) if m else 1001, text)
            return
        finally:
            if tmp:
                os.unlink(tmp)
        self.reply(200, out)

    def run(self, query: str, fmt: str, database: str | None, settings: dict) -> bytes:
        done = []
        try:
            if database:
                sess.query(f"USE {database}")
            for k, v in settings.items():
                sess.query(f"SET {k} = {quote(v)}")
                done.append(k)
            return sess.query(query, fmt).bytes()
        finally:
            for k in done:
                sess.query(f"SET {k} = DEFAULT")
            if database:
                sess.query("USE default")


def main():
    global sess, args
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--path", required=True)
    ap.add_argument("--user", default="default")
    ap.add_argument("--password", default="")
    args = ap.parse_args()
    os.makedirs(args.path, exist_ok=True)
    args.tmp = os.path.join(os.path.abspath(args.path), "tmp")
    os.makedirs(args.tmp, exist_ok=True)
    sess = chsession.Session(os.path.join(os.path.abspath(args.path), "data"))
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"chdb front on {args.host}:{args.port}", file=sys.stderr, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
