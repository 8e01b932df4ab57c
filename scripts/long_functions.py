#!/usr/bin/env python3
"""Lists the functions over a length outside tests and benches, longest first.

A function runs from its `fn` line to the closing brace at its own
indentation (rustfmt's layout). Left out: `tests/` and `benches/` folders,
`*_tests.rs` and `tests.rs` files, and everything after a file's first
`#[cfg(test)]` line. Fails when more than `--most` functions are over
`--lines` (the house bar: at most 12 over 80 lines).

Usage: scripts/long_functions.py [--lines N] [--most N] [DIR ...]   (default: crates bindings)
"""

import argparse
import re
import sys
from pathlib import Path

FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")


def functions(path):
    lines = path.read_text(encoding="utf-8").split("\n")
    end = next((k for k, l in enumerate(lines) if l.strip() == "#[cfg(test)]"), len(lines))
    i = 0
    while i < end:
        m = FN.match(lines[i])
        if m and not lines[i].rstrip().endswith(";"):
            indent = len(m.group(1))
            j = i + 1
            while j < end and not (
                lines[j].startswith(" " * indent + "}")
                and len(lines[j]) - len(lines[j].lstrip()) == indent
            ):
                j += 1
            yield j - i + 1, m.group(7)
            i = j
        i += 1


def main():
    args = argparse.ArgumentParser()
    args.add_argument("--lines", type=int, default=80)
    args.add_argument("--most", type=int, default=12)
    args.add_argument("dirs", nargs="*", default=["crates", "bindings"])
    a = args.parse_args()
    found = []
    for d in a.dirs:
        for path in Path(d).rglob("*.rs"):
            parts = set(path.parts)
            if parts & {"tests", "benches", "target", "node_modules"}:
                continue
            if path.name == "tests.rs" or path.name.endswith("_tests.rs"):
                continue
            found += [(n, str(path), name) for n, name in functions(path) if n > a.lines]
    found.sort(reverse=True)
    for n, path, name in found:
        print(f"{n:5} {path} {name}")
    print(f"{len(found)} functions over {a.lines} lines (at most {a.most})")
    return 0 if len(found) <= a.most else 1


if __name__ == "__main__":
    sys.exit(main())
