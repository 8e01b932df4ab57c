#!/usr/bin/env python3
"""The proxy's memory (RSS) around large requests: idle, after one spike, and
with many long sessions carried. Starts `abridge serve` (release build, its store
a SQLite file in a temporary folder) in front of a local upstream that answers every chat request at once,
so what is measured is the proxy alone.

    python3 benches/proxy_memory.py [--sessions 40] [--settle 15]

Rows: idle RSS; right after a 1M-message (33 MB) request and `--settle`
seconds later; after `--sessions` sessions of the 8 MB tool chat
(benches/workload.py, each its own `x-abridge-session`), and again after
settling; and the peak (VmHWM) of a fresh proxy sent `--concurrent` such
1M-message requests at once, which `[serve] max_preparing_megabytes` bounds
(pass a `--config` that raises it to see them unbounded). Issue 32's bars:
back within 10% of idle after a request, and 40 sessions of 8 MB adding at
most 100 MB.
"""
import argparse
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benches"))
import workload  # noqa: E402

ANSWER = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 1, "total_tokens": 1001},
}).encode()


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *_):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def post(port, body, session):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions", data=body, method="POST",
        headers={"content-type": "application/json", "authorization": "Bearer bench",
                 "x-abridge-session": session})
    with urllib.request.urlopen(req, timeout=600) as r:
        r.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--concurrent", type=int, default=4,
                    help="1M-message requests sent at once to a fresh proxy (0: skip)")
    ap.add_argument("--config", help="an abridge config file for the proxy")
    ap.add_argument("--no-store", action="store_true",
                    help="keep originals in memory (the default store is a SQLite file in a temporary folder)")
    args = ap.parse_args()

    # ABRIDGE_BIN: another build to measure (e.g. to compare two side by side).
    binary = os.environ.get("ABRIDGE_BIN")
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "abridge-cli"], cwd=ROOT, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        binary = os.path.join(target, "release", "abridge")
    up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=up.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{up.server_address[1]}/v1"
    try:
        with Proxy(binary, upstream, args) as p:
            p.post(json.dumps(workload.toolchat(200)).encode(), "warm")
            time.sleep(args.settle)
            p.idle = p.rss()
            print(f"{'idle, after a first small request':44s} {p.idle:8.0f} MB")
            spike = json.dumps(workload.tiny(1_000_000), separators=(",", ":")).encode()
            p.post(spike, "spike")
            print(f"{'after a %.0f MB request' % (len(spike) / 1e6):44s} {p.rss():8.0f} MB")
            time.sleep(args.settle)
            after = p.rss()
            print(f"{'  %.0f s later' % args.settle:44s} {after:8.0f} MB  ({after / p.idle:.2f}x idle;"
                  f" {p.sessions()} sessions in memory, their last bodies {p.held_mb():.0f} MB)")
        with Proxy(binary, upstream, args) as p:
            chat = workload.toolchat(10_000)
            prompt = chat["messages"][0]["content"]
            body = b""
            for i in range(args.sessions):
                chat["messages"][0]["content"] = f"session {i}: {prompt}"
                body = json.dumps(chat, separators=(",", ":")).encode()
                p.post(body, f"s{i}")
            grown = p.rss()
            label = "%d sessions of %.1f MB (fresh proxy)" % (args.sessions, len(body) / 1e6)
            print(f"{label:44s} {grown:8.0f} MB  (+{grown - p.idle:.0f} MB)")
            time.sleep(args.settle)
            settled = p.rss()
            print(f"{'  %.0f s later' % args.settle:44s} {settled:8.0f} MB  (+{settled - p.idle:.0f} MB;"
                  f" sessions hold {p.held_mb():.0f} MB of it)")
        if args.concurrent:
            with Proxy(binary, upstream, args) as p:
                spike = json.dumps(workload.tiny(1_000_000), separators=(",", ":")).encode()
                sent = [threading.Thread(target=p.post, args=(spike, f"c{i}"))
                        for i in range(args.concurrent)]
                start = time.time()
                for t in sent:
                    t.start()
                for t in sent:
                    t.join()
                took = time.time() - start
                label = "peak, %d requests of %.0f MB at once" % (args.concurrent, len(spike) / 1e6)
                print(f"{label:44s} {rss_mb(p.proc.pid, 'VmHWM'):8.0f} MB  (all answered in {took:.1f} s)")
    finally:
        up.shutdown()


class Proxy:
    """`abridge serve` on a free port, no store, in front of `upstream`."""

    def __init__(self, binary, upstream, args):
        self.port = free_port()
        self.dir = tempfile.TemporaryDirectory()
        store = ["--no-store"] if args.no_store else ["--store", os.path.join(self.dir.name, "abridge.db")]
        if args.config:
            store += ["--config", args.config]
        self.proc = subprocess.Popen(
            [binary, "serve", *store, "--listen", f"127.0.0.1:{self.port}",
             "--openai-upstream", upstream],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(1)
        self.idle = self.rss()
        return self

    def __exit__(self, *_):
        self.proc.terminate()
        self.proc.wait()
        self.dir.cleanup()

    def rss(self):
        return rss_mb(self.proc.pid)

    def metric(self, name):
        """A gauge of the proxy's own metrics."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return float("nan")

    def held_mb(self):
        """What the sessions' last bodies hold, by the proxy's own metric."""
        return self.metric("abridge_session_memory_bytes") / 2**20

    def sessions(self):
        """Sessions in memory."""
        return int(self.metric("abridge_active_sessions"))

    def post(self, body, session):
        post(self.port, body, session)


if __name__ == "__main__":
    main()
