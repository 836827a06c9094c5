#!/usr/bin/env python3
"""A loopback fake LLM server for mkengine's tests and benchmark.

Speaks three wire formats, streaming and not:
  OpenAI     POST /v1/chat/completions            (Authorization: Bearer KEY)
  Gemini     POST /v1beta/models/M:generateContent
             POST /v1beta/models/M:streamGenerateContent?alt=sse  (x-goog-api-key)
  Anthropic  POST /v1/messages                    (x-api-key, anthropic-version)

The reply is deterministic: text "echo: <last user message>", token counts
are word counts (input = words of system + all messages, output = words of
the reply, thinking = words of the thinking text when the model name
contains "think").

Faults are chosen by the model name (so every client can select them):
  ok             normal answer
  fault-429      first attempt 429 + retry-after: 1, then ok
  fault-429ms    first attempt 429 + retry-after-ms: 200, then ok
  fault-retryinfo  first attempt 429 with Gemini RetryInfo retryDelay "0.3s"
  fault-500x2    500 twice, then ok
  fault-529      529 overloaded once, then ok
  fault-nonjson  200 with an HTML body, always
  fault-cut      first attempt: stream/body cut in the middle; then ok
  fault-cutalways  every attempt cut
  fault-slow     answers after 10 s
  fault-streamerror  first attempt: a stream that carries an error event
                 mid-way (overloaded / server error); then ok
  fault-quota    terminal quota error (insufficient_quota / PerDay / billing)
  delay-N        answers after N milliseconds (the benchmark)
  fault-huge     a 1 GiB reply written until the client hangs up: without
                 Content-Length (plain) or as an endless-looking event stream;
                 generated on the fly, never held in memory
  fault-doneopen (stream) a complete answer ending `data: [DONE]`, then the
                 connection is held open for 30 s without a byte
  fault-stallmid (stream) first attempt: a few words, then nothing for 30 s;
                 later attempts answer normally
Attempts are counted per (wire format, model, request text), so tests use distinct
prompts. A wrong key answers 401 (Gemini: 400 API_KEY_INVALID).

GET /_stats -> {"requests": N, "by_model": {...}};  POST /_reset clears.

Usage: server.py [--port-file F] [--watch-pid PID] [--idle-exit S]
The port file receives "PORT PID\n" once listening. The server exits when
the watched process is gone or after --idle-exit seconds without requests.
"""
import argparse
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import loopback  # sibling module: port file and watchdog

KEY = "sk-test-fake-123"
LOCK = threading.Lock()
COUNTS = {}
STATS = {"requests": 0, "by_model": {}}
LAST = [time.time()]


def words(s):
    return len(s.split())


def content_text(c):
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        out = []
        for p in c:
            if isinstance(p, dict):
                out.append(p.get("text", ""))
        return " ".join(out)
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # quiet
        pass

    # ---- plumbing ----------------------------------------------------
    def send_json(self, code, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def chunk(self, s):
        b = s.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def cut(self):
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    # ---- routes --------------------------------------------------------
    def do_GET(self):
        if self.path == "/_stats":
            with LOCK:
                self.send_json(200, STATS)
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        LAST[0] = time.time()
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.path == "/_reset":
            with LOCK:
                COUNTS.clear()
                STATS["requests"] = 0
                STATS["by_model"] = {}
            return self.send_json(200, {"ok": True})
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return self.send_json(400, {"error": {"message": "body is not JSON"}})
        m = re.match(r"^/v1beta/models/([^:/]+):(generateContent|streamGenerateContent)", self.path)
        if self.path.rstrip("/").endswith("/chat/completions"):
            fmt, model, stream = "openai", req.get("model", ""), bool(req.get("stream"))
        elif self.path.rstrip("/").endswith("/v1/messages"):
            fmt, model, stream = "anthropic", req.get("model", ""), bool(req.get("stream"))
        elif m:
            fmt, model, stream = "gemini", m.group(1), m.group(2) == "streamGenerateContent"
        else:
            return self.send_json(404, {"error": {"message": "no route " + self.path}})
        with LOCK:
            STATS["requests"] += 1
            STATS["by_model"][model] = STATS["by_model"].get(model, 0) + 1
        if not self.key_ok(fmt):
            return self.bad_key(fmt)
        system, msgs = self.extract(fmt, req)
        last_user = ""
        for role, text in msgs:
            if role == "user":
                last_user = text
        ident = (fmt, model, json.dumps(msgs), system)
        with LOCK:
            COUNTS[ident] = COUNTS.get(ident, 0) + 1
            attempt = COUNTS[ident]
        if self.fault(fmt, model, attempt, stream):
            return
        text = "echo: " + last_user
        thinking = ("thinking about: " + last_user) if "think" in model else ""
        usage = {
            "input": words(system) + sum(words(t) for _, t in msgs),
            "output": words(text),
            "thinking": words(thinking),
        }
        cut = model == "fault-cutalways" or (model == "fault-cut" and attempt == 1)
        if stream and model == "fault-streamerror" and attempt == 1:
            return self.stream_error(fmt)
        if stream and model == "fault-doneopen":
            return self.stream_done_open(model, text)
        if stream and model == "fault-stallmid" and attempt == 1:
            return self.stream_stall(model)
        if stream:
            getattr(self, "stream_" + fmt)(model, text, thinking, usage, cut)
        else:
            self.reply(fmt, model, text, thinking, usage, cut)

    # ---- auth ----------------------------------------------------------
    def key_ok(self, fmt):
        if fmt == "openai":
            return self.headers.get("authorization") == "Bearer " + KEY
        if fmt == "gemini":
            return self.headers.get("x-goog-api-key") == KEY
        return self.headers.get("x-api-key") == KEY and bool(self.headers.get("anthropic-version"))

    def bad_key(self, fmt):
        if fmt == "openai":
            self.send_json(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}})
        elif fmt == "gemini":
            self.send_json(400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
                                           "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}})
        else:
            self.send_json(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})

    def extract(self, fmt, req):
        msgs = []
        if fmt == "gemini":
            si = req.get("systemInstruction") or {}
            system = " ".join(p.get("text", "") for p in si.get("parts", []))
            for c in req.get("contents", []):
                msgs.append((c.get("role", "user") == "model" and "assistant" or "user",
                             " ".join(p.get("text", "") for p in c.get("parts", []))))
            return system, msgs
        system = content_text(req.get("system", ""))
        for mm in req.get("messages", []):
            if mm.get("role") == "system":
                system = (system + " " + content_text(mm.get("content"))).strip()
            else:
                msgs.append((mm.get("role"), content_text(mm.get("content"))))
        return system, msgs

    # ---- faults --------------------------------------------------------
    def err(self, fmt, code, message, etype, headers=None, details=None):
        if fmt == "openai":
            body = {"error": {"message": message, "type": etype, "code": etype}}
        elif fmt == "gemini":
            status = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}.get(code, "UNKNOWN")
            body = {"error": {"code": code, "message": message, "status": status, "details": details or []}}
        else:
            body = {"type": "error", "error": {"type": etype, "message": message}}
        self.send_json(code, body, headers)

    def fault(self, fmt, model, attempt, stream):
        if model.startswith("delay-"):
            time.sleep(int(model[6:]) / 1000.0)
            return False
        if model == "fault-slow":
            time.sleep(10)
            return False
        if model == "fault-429" and attempt == 1:
            self.err(fmt, 429, "Rate limit reached, retry later", "rate_limit_error", {"retry-after": "1"})
            return True
        if model == "fault-429ms" and attempt == 1:
            self.err(fmt, 429, "Rate limit reached, retry later", "rate_limit_error", {"retry-after-ms": "200"})
            return True
        if model == "fault-retryinfo" and attempt == 1:
            self.err(fmt, 429, "Resource has been exhausted", "rate_limit_error", None,
                     [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}])
            return True
        if model == "fault-500x2" and attempt <= 2:
            self.err(fmt, 500, "Internal server error", "server_error")
            return True
        if model == "fault-529" and attempt == 1:
            self.err(fmt, 529, "Overloaded", "overloaded_error")
            return True
        if model == "fault-huge":
            self.huge(stream)
            return True
        if model == "fault-nonjson":
            data = b"<html><body>502 Bad Gateway from some proxy</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True
        if model == "fault-quota":
            if fmt == "openai":
                self.err(fmt, 429, "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota")
            elif fmt == "gemini":
                self.err(fmt, 429, "Quota exceeded for metric generate_content_requests per day", "", None,
                         [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                           "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
                          {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}])
            else:
                self.err(fmt, 402, "Your credit balance is too low to access the API.", "billing_error")
            return True
        return False

    # ---- non-streaming replies ----------------------------------------
    def reply(self, fmt, model, text, thinking, usage, cut):
        if fmt == "openai":
            msg = {"role": "assistant", "content": text}
            if thinking:
                msg["reasoning_content"] = thinking
            body = {"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": usage["input"], "completion_tokens": usage["output"] + usage["thinking"],
                              "total_tokens": usage["input"] + usage["output"] + usage["thinking"],
                              "completion_tokens_details": {"reasoning_tokens": usage["thinking"]}}}
        elif fmt == "gemini":
            parts = []
            if thinking:
                parts.append({"text": thinking, "thought": True})
            parts.append({"text": text})
            body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": self.gemini_usage(usage, True)}
        else:
            content = []
            if thinking:
                content.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
            content.append({"type": "text", "text": text})
            body = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": usage["input"], "output_tokens": usage["output"] + usage["thinking"]}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if cut:
            self.wfile.write(data[: len(data) // 2])
            return self.cut()
        self.wfile.write(data)

    @staticmethod
    def gemini_usage(usage, final):
        u = {"promptTokenCount": usage["input"], "candidatesTokenCount": usage["output"] if final else 1,
             "totalTokenCount": usage["input"] + usage["output"] + usage["thinking"]}
        if usage["thinking"]:
            u["thoughtsTokenCount"] = usage["thinking"]
        return u

    # ---- streaming replies ---------------------------------------------
    def stream_error(self, fmt):
        self.start_stream()
        if fmt == "openai":
            self.chunk('data: {"choices": [{"index": 0, "delta": {"content": "par"}}]}\n\n')
            self.chunk('data: {"error": {"message": "The server had an error", "type": "server_error", "code": null}}\n\n')
        elif fmt == "gemini":
            self.chunk('data: {"candidates": [{"content": {"parts": [{"text": "par"}]}}]}\r\n\r\n')
            self.chunk('data: {"error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}}\r\n\r\n')
        else:
            self.chunk('event: message_start\ndata: {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}\n\n')
            self.chunk('event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n')
        self.end_stream()

    def huge(self, stream, total=1 << 30):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if stream else "application/json")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        if stream:
            piece = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 65000}}]}) + "\n\n"
            block = piece.encode()
        else:
            block = b'{"choices": [' + b" " * (1 << 20)
        sent = 0
        try:
            while sent < total:
                self.wfile.write(block)
                sent += len(block)
        except OSError:
            pass  # the client hung up: what the cap is for

    def stream_done_open(self, model, text):
        self.start_stream()
        for p in self.pieces(text):
            self.chunk("data: " + json.dumps({"model": model, "choices": [{"index": 0, "delta": {"content": p}}]}) + "\n\n")
        self.chunk("data: " + json.dumps({"model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n")
        self.chunk("data: [DONE]\n\n")
        time.sleep(30)  # no end of the chunked body: the client must stop at [DONE]
        self.close_connection = True

    def stream_stall(self, model):
        self.start_stream()
        self.chunk("data: " + json.dumps({"model": model, "choices": [{"index": 0, "delta": {"content": "Hel"}}]}) + "\n\n")
        time.sleep(30)
        self.close_connection = True

    @staticmethod
    def pieces(text):
        ws = text.split(" ")
        return [w + (" " if i < len(ws) - 1 else "") for i, w in enumerate(ws)]

    def stream_openai(self, model, text, thinking, usage, cut):
        self.start_stream()

        def ev(delta, finish=None):
            c = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.chunk("data: " + json.dumps(c) + "\n\n")

        ev({"role": "assistant", "content": ""})
        for p in self.pieces(thinking) if thinking else []:
            ev({"reasoning_content": p})
        ps = self.pieces(text)
        for i, p in enumerate(ps):
            if cut and i == len(ps) // 2:
                return self.cut()
            ev({"content": p})
        ev({}, "stop")
        u = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model, "choices": [],
             "usage": {"prompt_tokens": usage["input"], "completion_tokens": usage["output"] + usage["thinking"],
                       "total_tokens": usage["input"] + usage["output"] + usage["thinking"],
                       "completion_tokens_details": {"reasoning_tokens": usage["thinking"]}}}
        self.chunk("data: " + json.dumps(u) + "\n\n")
        self.chunk("data: [DONE]\n\n")
        self.end_stream()

    def stream_gemini(self, model, text, thinking, usage, cut):
        self.start_stream()
        parts = []
        if thinking:
            parts.append(({"text": thinking, "thought": True}, False))
        ps = self.pieces(text)
        for p in ps:
            parts.append(({"text": p}, False))
        for i, (part, _) in enumerate(parts):
            last = i == len(parts) - 1
            if cut and i == len(parts) // 2:
                return self.cut()
            cand = {"content": {"role": "model", "parts": [part]}, "index": 0}
            if last:
                cand["finishReason"] = "STOP"
            c = {"candidates": [cand], "usageMetadata": self.gemini_usage(usage, last), "modelVersion": model}
            self.chunk("data: " + json.dumps(c) + "\r\n\r\n")
        self.end_stream()

    def stream_anthropic(self, model, text, thinking, usage, cut):
        self.start_stream()

        def ev(name, obj):
            obj["type"] = name
            self.chunk("event: " + name + "\ndata: " + json.dumps(obj) + "\n\n")

        ev("message_start", {"message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                                         "content": [], "stop_reason": None,
                                         "usage": {"input_tokens": usage["input"], "output_tokens": 1}}})
        idx = 0
        if thinking:
            ev("content_block_start", {"index": idx, "content_block": {"type": "thinking", "thinking": ""}})
            for p in self.pieces(thinking):
                ev("content_block_delta", {"index": idx, "delta": {"type": "thinking_delta", "thinking": p}})
            ev("content_block_delta", {"index": idx, "delta": {"type": "signature_delta", "signature": "sig"}})
            ev("content_block_stop", {"index": idx})
            idx += 1
        ev("content_block_start", {"index": idx, "content_block": {"type": "text", "text": ""}})
        ev("ping", {})
        ps = self.pieces(text)
        for i, p in enumerate(ps):
            if cut and i == len(ps) // 2:
                return self.cut()
            ev("content_block_delta", {"index": idx, "delta": {"type": "text_delta", "text": p}})
        ev("content_block_stop", {"index": idx})
        ev("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                             "usage": {"output_tokens": usage["output"] + usage["thinking"]}})
        ev("message_stop", {})
        self.end_stream()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--watch-pid", type=int)
    ap.add_argument("--idle-exit", type=float, default=300)
    a = ap.parse_args()
    # many threads wake at once in the benchmark: hand the GIL over quickly
    sys.setswitchinterval(0.0002)
    srv = Server(("127.0.0.1", a.port), Handler)
    port = srv.server_address[1]
    loopback.announce(port, a.port_file)
    loopback.watchdog(a.watch_pid, a.idle_exit, LAST)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
