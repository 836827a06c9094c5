#!/usr/bin/env python3
"""A single-threaded asyncio loopback server for the LLM benchmark.

Answers every POST .../chat/completions (OpenAI wire format) after a fixed
delay with an SSE stream: one event per word of "echo: <last user
message>", a finish event, a usage event and [DONE]. The threaded fake
server (server.py) spends more time in its GIL than the engine under test
does when 256 streams wake at once; this one does not, so the benchmark
measures the engine.

Usage: bench_server.py --port-file F [--delay S] [--watch-pid PID] [--workers N]
"""
import argparse
import asyncio
import json
import os
import socket
import sys

import loopback  # sibling module: port file and watchdog


async def handle(reader, writer, delay):
    # no Nagle: the events after the first would wait for the client's
    # delayed ACK (40 ms), which the benchmark would then measure
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            body = await reader.readexactly(length) if length else b""
            try:
                req = json.loads(body or b"{}")
                text = "echo: " + req["messages"][-1]["content"]
                model = req.get("model", "")
            except (ValueError, KeyError, IndexError, TypeError):
                writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            words = text.split(" ")
            events = []

            def ev(delta, finish=None):
                c = {"object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                events.append("data: " + json.dumps(c) + "\n\n")

            for i, w in enumerate(words):
                ev({"content": w + (" " if i < len(words) - 1 else "")})
            ev({}, "stop")
            events.append("data: " + json.dumps({"object": "chat.completion.chunk", "model": model, "choices": [],
                                                 "usage": {"prompt_tokens": len(words) - 1,
                                                           "completion_tokens": len(words)}}) + "\n\n")
            events.append("data: [DONE]\n\n")
            chunks = [b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in events]
            # the answer is ready before the delay, so the delay is all the server adds
            await asyncio.sleep(delay)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for c in chunks:  # one write per event: each leaves as its own segment when the socket is free
                writer.write(c)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve(a, sock, write_port):
    srv = await asyncio.start_server(lambda r, w: handle(r, w, a.delay), sock=sock, backlog=1024)
    if write_port:
        loopback.announce(srv.sockets[0].getsockname()[1], a.port_file)
    parent = os.getppid()
    while True:
        await asyncio.sleep(0.5)
        if not write_port and os.getppid() != parent:  # a worker whose server is gone
            sys.exit(0)
        if not loopback.alive(a.watch_pid):
            sys.exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--watch-pid", type=int)
    ap.add_argument("--workers", type=int, default=1, help="processes accepting on the same socket")
    a = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    for _ in range(a.workers - 1):
        if os.fork() == 0:
            asyncio.run(serve(a, sock, False))
            return
    asyncio.run(serve(a, sock, True))


if __name__ == "__main__":
    main()
