"""Independent reader of a RabbitMQ stream the rabbitmq-stream sink wrote,
with the rstream client (not the Go client the sink uses).

usage: rabbitstream_read.py HOST PORT USER PASSWORD STREAM COLUMN

Publishes a sentinel message with a plain producer, then reads the stream
from its first message up to the sentinel, skips the sink's control
messages (application property flightline-control) and other sentinels,
and prints COLUMN of every row (a JSON object per message), one per line.
A binary column (base64 in the JSON) is printed decoded.
"""
import asyncio
import base64
import binascii
import json
import sys
import uuid

from rstream import AMQPMessage, Consumer, ConsumerOffsetSpecification, OffsetType, Producer, amqp_decoder

host, port, user, password, stream, column = sys.argv[1:7]
port = int(port)


def prop(msg, key):
    ap = msg.application_properties or {}
    for k, v in ap.items():
        k = k.decode() if isinstance(k, bytes) else k
        if k == key:
            return v.decode() if isinstance(v, bytes) else v
    return None


def value(v):
    if isinstance(v, str):
        try:
            b = base64.b64decode(v, validate=True)
            s = b.decode("ascii")
            if s.isprintable():
                return s
        except (binascii.Error, UnicodeDecodeError):
            pass
    return str(v)


async def main():
    token = "sentinel-" + uuid.uuid4().hex
    async with Producer(host, port=port, username=user, password=password) as p:
        await p.send_wait(stream, AMQPMessage(body=b"{}", application_properties={"test-sentinel": token}))
    out = []
    done = asyncio.Event()

    async def on_message(msg, ctx):
        if done.is_set():
            return
        s = prop(msg, "test-sentinel")
        if s is not None:
            if s == token:
                done.set()
            return
        if prop(msg, "flightline-control") is not None:
            return
        body = b"".join(msg.body) if isinstance(msg.body, list) else bytes(msg.body)
        out.append(value(json.loads(body)[column]))

    consumer = Consumer(host, port=port, username=user, password=password)
    await consumer.start()
    await consumer.subscribe(stream, on_message,
                             offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
                             decoder=amqp_decoder)
    await asyncio.wait_for(done.wait(), timeout=120)
    await consumer.close()
    print("\n".join(out))


asyncio.run(main())
