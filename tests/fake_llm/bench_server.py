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


def stream_chunks(text, model):
    """The SSE answer to a streaming call, one chunked-encoding chunk per
    event: one event per word, a finish event, a usage event, [DONE]."""
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
    return [b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in events]


def answer(head, body, program):
    """The writes that answer one request (one per SSE event, so each leaves
    as its own segment when the socket is free), or None for GET /calls."""
    if head.startswith(b"GET /calls"):  # bench/peers: "COUNT FIRST LAST" since the last reset
        n = b"%d %.6f %.6f" % (len(STAMPS), STAMPS[0] if STAMPS else 0, STAMPS[-1] if STAMPS else 0)
        if head.startswith(b"GET /calls?reset "):
            STAMPS.clear()
        return None, [b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(n), n)]
    try:
        req = json.loads(body or b"{}")
        text = "echo: " + req["messages"][-1]["content"]
        model = req.get("model", "")
        if program:
            text = program_reply()
    except (ValueError, KeyError, IndexError, TypeError):
        return None, [b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"]
    if program and not req.get("stream"):
        body = whole_answer(text, model)
        return True, [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                      % (len(body), body)]
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    return True, [head] + stream_chunks(text, model) + [b"0\r\n\r\n"]


class Conn(asyncio.Protocol):
    """One keep-alive connection: requests answered in order, a model answer
    after the delay (the answer is ready before it, so the delay is all the
    server adds). A protocol rather than asyncio streams: the test double
    should cost less than the engine it measures."""

    def __init__(self, delay, program):
        self.delay, self.program = delay, program
        self.buf, self.t, self.waiting = b"", None, None

    def connection_made(self, transport):
        self.t = transport
        # no Nagle: the events after the first would wait for the client's
        # delayed ACK (40 ms), which the benchmark would then measure
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc):
        if self.waiting:
            self.waiting.cancel()
        self.t = None

    def data_received(self, data):
        self.buf += data
        self.next_request()

    def next_request(self):
        while self.t is not None and self.waiting is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:  # a head larger than asyncio's stream limit
                    self.t.close()
                return
            head, length = self.buf[:end], 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            model_answer, writes = answer(head, body, self.program)
            if model_answer and self.delay > 0:
                self.waiting = asyncio.get_running_loop().call_later(self.delay, self.send_later, writes)
                return
            self.send(writes)

    def send(self, writes):
        for w in writes:
            self.t.write(w)

    def send_later(self, writes):
        self.waiting = None
        if self.t is not None:
            self.send(writes)
            self.next_request()


async def serve(a, sock, write_port):
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Conn(a.delay, a.program), sock=sock, backlog=1024)
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
