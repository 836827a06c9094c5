#!/usr/bin/env python3
"""A loopback OpenAI-compatible server that replies LIKE A MODEL (a test
double for mkengine's end-to-end tests): it recognises which sub-agent
wrote the prompt and answers in that agent's format.

  plan prompts        -> a short optimisation plan
  implement/fix/tune  -> the C kernel given with --kernel, in a ```c block
  profile prompts     -> one sentence of feedback
  tests prompts       -> a ```json block with no extra sizes

Streaming (SSE with a final usage chunk) and non-streaming replies.
Usage: model_server.py --kernel FILE [--port N] [--port-file F] [--key KEY] [--watch-pid PID]
GET /_stats -> {"requests": N, "agents": {...}}
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import loopback  # sibling module: port file and watchdog

STATS = {"requests": 0, "agents": {}}
LOCK = threading.Lock()


def agent_of(prompt):
    if "Write an optimisation plan" in prompt:
        return "plan"
    if "Propose up to" in prompt:
        return "tests"
    if "In at most five sentences" in prompt:
        return "profile"
    if "Repair the kernel" in prompt:
        return "fix"
    if "Choose the tunable parameters" in prompt:
        return "tune"
    return "implement"


def reply_for(agent, kernel):
    if agent == "plan":
        return ("Vectorise the row loops\n\nCompute the sum of squares of each row with a "
                "contiguous inner loop the compiler can vectorise, then scale the row in a "
                "second contiguous pass; parallelise over rows with OpenMP.")
    if agent == "tests":
        return "```json\n[]\n```"
    if agent == "profile":
        return "The kernel streams each row twice; it is memory-bound, so fuse passes next."
    return "Here is the kernel.\n\n```c\n" + kernel + "\n```\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # streamed events must not wait for a delayed ACK

    def log_message(self, *a):
        pass

    def _send(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_stats":
            with LOCK:
                self._send(200, json.dumps(STATS))
        else:
            self._send(404, "{}")

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.headers.get("authorization") != "Bearer " + self.server.key:
            self._send(401, json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}))
            return
        if not self.path.endswith("/chat/completions"):
            self._send(404, json.dumps({"error": {"message": "not found"}}))
            return
        prompt = "\n".join(m.get("content", "") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                           for m in body.get("messages", []))
        agent = agent_of(prompt)
        with LOCK:
            STATS["requests"] += 1
            STATS["agents"][agent] = STATS["agents"].get(agent, 0) + 1
        text = reply_for(agent, self.server.kernel)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        model = body.get("model", "fake")
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            chunks = [text[i:i + 40] for i in range(0, len(text), 40)]
            for c in chunks:
                ev = {"id": "x", "object": "chat.completion.chunk", "model": model,
                      "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
                self.wfile.write(("data: " + json.dumps(ev) + "\n\n").encode())
            end = {"id": "x", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(("data: " + json.dumps(end) + "\n\n").encode())
            u = {"id": "x", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage}
            self.wfile.write(("data: " + json.dumps(u) + "\n\n").encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(200, json.dumps({
                "id": "x", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    ap.add_argument("--port-file")
    ap.add_argument("--key", default="sk-test-model-456")
    ap.add_argument("--watch-pid", type=int)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.kernel = open(a.kernel).read()
    srv.key = a.key
    port = srv.server_address[1]
    loopback.announce(port, a.port_file)
    loopback.watchdog(a.watch_pid)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
