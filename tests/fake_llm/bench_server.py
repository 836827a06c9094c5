#!/usr/bin/env python3
"""A single-threaded asyncio loopback server for the LLM benchmark.

Answers every POST .../chat/completions (OpenAI wire format) after a fixed
delay with an SSE stream: one event per word of "echo: <last user
message>", a finish event, a usage event and [DONE]. The threaded fake
server (server.py) spends more time in its GIL than the engine under test
does when 256 streams wake at once; this one does not, so the benchmark
measures the engine.

With --program, the answer is instead a full rewrite of a small Python
program inside EVOLVE-BLOCK markers (about 2 KB, numbered per call so that
every program differs), which search engines of other projects accept
(bench/peers/); a request with "stream": false then gets one JSON answer.

GET /calls answers "COUNT FIRST LAST": the program answers since the last
GET /calls?reset and the times of the first and last (time.monotonic()).

Usage: bench_server.py --port-file F [--delay S] [--watch-pid PID] [--workers N] [--program]
"""
import argparse
import asyncio
import json
import os
import socket
import sys
import time

import loopback  # sibling module: port file and watchdog


CALLS = [0]
STAMPS = []  # time.monotonic() of each program answer since the last GET /calls?reset


def program_reply():
    CALLS[0] += 1
    STAMPS.append(time.monotonic())
    n = CALLS[0]
    pad = "".join("    # step %d of candidate %d: a line of the rewritten program\n" % (i, n) for i in range(30))
    return ("<NAME>\ncandidate_%d\n</NAME>\n<DESCRIPTION>\nA full rewrite, number %d.\n</DESCRIPTION>\n<CODE>\n"
            "```python\n# EVOLVE-BLOCK-START\ndef solve(x):\n    \"\"\"candidate %d\"\"\"\n%s    return x * %d %% 97\n"
            "# EVOLVE-BLOCK-END\n```\n</CODE>\n" % (n, n, n, pad, n))


def whole_answer(text, model):
    return json.dumps({"id": "b%d" % CALLS[0], "object": "chat.completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": len(text) // 4,
                                 "total_tokens": 100 + len(text) // 4}}).encode()


async def handle(reader, writer, delay, program=False):
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
            if head.startswith(b"GET /calls"):  # bench/peers: "COUNT FIRST LAST" since the last reset
                n = b"%d %.6f %.6f" % (len(STAMPS), STAMPS[0] if STAMPS else 0, STAMPS[-1] if STAMPS else 0)
                if head.startswith(b"GET /calls?reset "):
                    STAMPS.clear()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(n), n))
                await writer.drain()
                continue
            try:
                req = json.loads(body or b"{}")
                text = "echo: " + req["messages"][-1]["content"]
                model = req.get("model", "")
                if program:
                    text = program_reply()
            except (ValueError, KeyError, IndexError, TypeError):
                writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            if program and not req.get("stream"):
                body = whole_answer(text, model)
                await asyncio.sleep(delay)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(body), body))
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
    srv = await asyncio.start_server(lambda r, w: handle(r, w, a.delay, a.program), sock=sock, backlog=1024)
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
    ap.add_argument("--program", action="store_true", help="answer with a full rewrite of a Python program")
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
