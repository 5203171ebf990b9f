"""The pyarrow (C++) Flight hop peer of BenchmarkFlightHop: the same batches
(8 int64 columns a..h, column c holding i * (c + 1)) between a pyarrow
Flight server and a pyarrow Flight client, each in its own process, written
as a pyarrow user would write them.

usage:
  flight_hop_peer.py server ROWS          prints "listening on HOST:PORT"
  flight_hop_peer.py client ROWS HOST:PORT
      prints "ready", then for each stdin line "get N" (DoGet: read N
      batches from the server) or "put N" (DoPut: send N batches, the
      server reads each one) prints the elapsed seconds.
"""
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight


def hop_batch(rows):
    return pa.record_batch(
        [pa.array([i * (c + 1) for i in range(rows)], pa.int64()) for c in range(8)],
        names=[chr(ord("a") + c) for c in range(8)])


class Server(flight.FlightServerBase):
    def __init__(self, rows):
        super().__init__("grpc://127.0.0.1:0")
        self.batch = hop_batch(rows)

    def do_get(self, context, ticket):
        n = int(ticket.ticket.decode())
        return flight.RecordBatchStream(pa.Table.from_batches([self.batch] * n))

    def do_put(self, context, descriptor, reader, writer):
        while True:
            try:
                reader.read_chunk()
            except StopIteration:
                break


def main():
    mode, rows = sys.argv[1], int(sys.argv[2])
    if mode == "server":
        s = Server(rows)
        print(f"listening on 127.0.0.1:{s.port}", flush=True)
        s.serve()
        return
    client = flight.connect("grpc://" + sys.argv[3])
    batch = hop_batch(rows)
    print("ready", flush=True)
    for line in sys.stdin:
        op, n = line.split()
        n = int(n)
        t0 = time.perf_counter()
        if op == "get":
            reader = client.do_get(flight.Ticket(str(n).encode()))
            got = 0
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                got += 1
            if got != n:
                raise SystemExit(f"got {got} batches, want {n}")
        else:
            writer, _ = client.do_put(flight.FlightDescriptor.for_path("hop"), batch.schema)
            for _ in range(n):
                writer.write_batch(batch)
            writer.close()
        print(time.perf_counter() - t0, flush=True)


if __name__ == "__main__":
    main()
