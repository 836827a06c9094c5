#!/usr/bin/env python3
"""Baseline for bench/llm_bench.lua: the same 256 concurrent streaming
requests, made by a bare Python asyncio client (raw HTTP/1.1, no JSON
parsing of the reply) against the same tests/fake_llm/bench_server.py. It
shows what the machine and the server allow at that moment.

Usage: python3 bench/llm_bench_baseline.py [N] [rounds]
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


async def one(port, i, t0, res):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "call %d" % i}]}).encode()
    w.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))
    await w.drain()
    data = b""
    while not data.endswith(b"0\r\n\r\n"):
        d = await r.read(65536)
        if not d:
            break
        data += d
    res.append(time.monotonic() - t0)
    w.close()


async def main(port, n, rounds):
    for k in range(rounds):
        t0 = time.monotonic()
        res = []
        await asyncio.gather(*[one(port, i, t0, res) for i in range(n)])
        res.sort()
        print("round %d: %d streaming calls in %.3f s wall; latency min %.3f median %.3f max %.3f s"
              % (k + 1, n, time.monotonic() - t0, res[0], res[n // 2], res[-1]))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    d = tempfile.mkdtemp()
    pf = os.path.join(d, "port")
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "tests", "fake_llm", "bench_server.py"),
                            "--port-file", pf, "--delay", "1", "--watch-pid", str(os.getpid())])
    try:
        while not os.path.exists(pf):
            time.sleep(0.02)
        port = int(open(pf).read().split()[0])
        asyncio.run(main(port, n, rounds))
    finally:
        srv.kill()
        srv.wait()
