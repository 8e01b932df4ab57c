"""Processes the SDK and client tests start: `abridge-fake-provider` and
`abridge serve`, each printing its base URL on its first line, and what
they report (`/_report`, `/metrics`)."""

import json
import os
import subprocess
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug")


def start(args):
    """Starts a process that prints its base URL on its first line."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url.rstrip(")").rstrip(";")


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def provider(*flags):
    """The fake provider with `flags` (e.g. `--script 60`)."""
    return start([os.path.join(BIN, "abridge-fake-provider"), *flags])


def proxy(upstream, config, *flags):
    """`abridge serve` in front of the fake provider, with `config`."""
    return start([os.path.join(BIN, "abridge"), "serve", "--listen", "127.0.0.1:0", "--config", config,
                  "--openai-upstream", upstream + "/v1", "--anthropic-upstream", upstream,
                  "--gemini-upstream", upstream, *flags])


def report(upstream):
    """Every request the fake provider checked."""
    return json.loads(get(upstream + "/_report"))["requests"]


def metric(text, prefix):
    """The sum of the samples of a metric whose line starts with `prefix`."""
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(prefix))


def stop(*procs):
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
        p.stdout.close()
