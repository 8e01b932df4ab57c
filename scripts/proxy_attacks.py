"""Plays a hostile client against an `abridge serve` binary, on loopback only:
a path that tries to reach another host, a Gemini request and its key, a
foreign Host header (DNS rebinding), eight requests that announce 32 MB
bodies and send none, eight that send 31 MB of 32 and stall, and 1,100 connections that send nothing with the
server held to 1,024 open files. Prints what got through. The
proxy's tests assert the same (crates/proxy/tests/it/{routes,connections}.rs);
this runs any build, old or new, side by side.

usage: python3 scripts/proxy_attacks.py target/release/abridge
       OPENAI_BASE=http://127.0.0.1:18101/v1 python3 scripts/proxy_attacks.py BINARY

Uses ports 18101, 18102 (recording upstreams) and 18787 (the proxy).
"""
import http.server, json, os, resource, socket, subprocess, sys, threading, time, tempfile

BIN = sys.argv[1]
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))
seen = {18101: [], 18102: []}


class Rec(http.server.BaseHTTPRequestHandler):
    def _any(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)
        seen[self.server.server_port].append((self.path, dict(self.headers)))
        body = b'{"object":"list","data":[]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *a):
        pass


for port in seen:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Rec)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def raw(target, headers=(), host="127.0.0.1:18787", method="GET", timeout=5):
    s = socket.create_connection(("127.0.0.1", 18787), timeout=timeout)
    req = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    for k, v in headers:
        req += f"{k}: {v}\r\n"
    req += "Content-Length: 2\r\n\r\n{}"
    s.sendall(req.encode())
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        return None
    finally:
        s.close()
    return int(out.split()[1]) if out else None


def serve(extra=()):
    home = tempfile.mkdtemp()
    env = dict(os.environ, HOME=home, XDG_DATA_HOME=home)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    p = subprocess.Popen(
        [BIN, "serve", "--listen", "127.0.0.1:18787", "--openai-upstream", os.environ.get("OPENAI_BASE", "http://127.0.0.1:18101"),
         "--anthropic-upstream", "http://127.0.0.1:18101", "--store", f"{home}/s.sqlite", *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", 18787), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the proxy did not start")


p = serve()
key = [("Authorization", "Bearer sk-SECRET")]
for k in seen:
    seen[k].clear()
st = raw("/v1@127.0.0.1:18102/v1/models", key)
print(f"path escape /v1@127.0.0.1:18102/v1/models: status {st}; requests that reached the other host: {len(seen[18102])}")
st = raw("/v1beta/models/gemini-2.5-pro:generateContent", [("x-goog-api-key", "AIza-SECRET")], method="POST")
goog = [h for (_, h) in seen[18101] if any(k.lower() == "x-goog-api-key" for k in h)]
print(f"Gemini request: status {st}; Gemini keys that reached the OpenAI upstream: {len(goog)}")
st = raw("/metrics", host="attacker.example")
print(f"Host: attacker.example on /metrics: status {st}")
# Eight requests announcing 32 MB bodies (the default max_receiving_megabytes
# is 256), sending nothing, then a normal request beside them.
announced = []
for _ in range(8):
    c = socket.create_connection(("127.0.0.1", 18787), timeout=2)
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:18787\r\n"
              b"Content-Type: application/json\r\nContent-Length: 33554432\r\n\r\n")
    announced.append(c)
time.sleep(0.5)
t = time.time()
st = raw("/v1/chat/completions", method="POST", timeout=10)
print(f"beside 8 idle 32 MB announcements: a 2-byte request's status {st} in {time.time() - t:.2f} s")
for c in announced:
    c.close()
# Eight requests sending 31 MB of an announced 32 MB and stalling (248 MB of
# the 256 held), then a 2 MB request.
stalled = []
for _ in range(8):
    c = socket.create_connection(("127.0.0.1", 18787), timeout=10)
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:18787\r\n"
              b"Content-Type: application/json\r\nContent-Length: 33554432\r\n\r\n" + b" " * (31 << 20))
    stalled.append(c)
time.sleep(1.5)
t = time.time()
c = socket.create_connection(("127.0.0.1", 18787), timeout=10)
body = b'{"pad":"' + b"x" * (2 << 20) + b'"}'
c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:18787\r\nConnection: close\r\n"
          b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
try:
    answer = c.recv(64)
except socket.timeout:
    answer = b""
c.close()
status = answer.split()[1].decode() if answer else None
print(f"beside 8 stalled 31 MB bodies: a 2 MB request's status {status} in {time.time() - t:.2f} s")
for c in stalled:
    c.close()
# 1,100 connections that send nothing, then a normal request.
idle = []
for _ in range(1100):
    try:
        idle.append(socket.create_connection(("127.0.0.1", 18787), timeout=2))
    except OSError:
        break
time.sleep(1.5)
t = time.time()
st = raw("/healthz", timeout=5)
print(f"after {len(idle)} idle connections: /healthz status {st} in {time.time() - t:.2f} s")
for s in idle:
    s.close()
p.terminate()
p.wait()
