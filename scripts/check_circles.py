#!/usr/bin/env python3
"""Fails when files inside one crate import each other in a circle.

A file's imports are the modules it names through `crate::…` and
`super::…` paths (in `use` lines and in code); each resolves to the file
that defines the longest module prefix of the path. Circles (strongly
connected sets of two or more files) are printed with the names that tie
them. A parent module's own `mod` lines are not imports. Tests are left
out: `#[cfg(test)]` modules and `tests/` folders.

Usage: scripts/check_circles.py [CRATE_DIR ...]   (default: crates/* and bindings/*)
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
GROUP = re.compile(r"\b(crate|super)::\{([^}]*)\}")


def module_files(src: Path) -> dict[tuple[str, ...], Path]:
    """Module path (from the crate root) -> its file."""
    files = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("lib", "main") and len(parts) == 1:
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        if parts and parts[0] == "bin":
            continue
        files[tuple(parts)] = f
    return files


def without_tests(text: str) -> str:
    """The text before a `#[cfg(test)]` module (tests come last here)."""
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s", text)
    return text[: cut.start()] if cut else text


def imports(module: tuple[str, ...], text: str) -> list[list[str]]:
    paths = []
    for m in GROUP.finditer(text):
        base = [] if m.group(1) == "crate" else ["super"]
        for item in m.group(2).split(","):
            item = item.strip().split(" as ")[0]
            if item and item != "self":
                paths.append(base + item.split("::"))
    for m in PATH.finditer(text):
        if m.group(2) == "::{":
            continue
        base = [] if m.group(1) == "crate" else ["super"]
        paths.append(base + m.group(2).strip(":").split("::"))
    resolved = []
    for p in paths:
        if p and p[0] == "super":
            p = list(module[:-1]) + p[1:]
        resolved.append(p)
    return resolved


def circles(crate: Path) -> list[str]:
    src = crate / "src"
    if not src.is_dir():
        return []
    files = module_files(src)
    edges: dict[tuple, dict[tuple, set[str]]] = {m: {} for m in files}
    for module, f in files.items():
        text = without_tests(f.read_text(encoding="utf-8"))
        for path in imports(module, text):
            for n in range(len(path), 0, -1):
                target = tuple(path[:n])
                if target in files:
                    break
            else:
                continue
            # A module's own children and its parent's re-exports are not circles.
            if target == module or target == () or module[: len(target)] == target:
                continue
            edges[module].setdefault(target, set()).add(path[n] if n < len(path) else "*")
    return [
        describe(group, files, edges, crate)
        for group in strongly_connected(edges)
        if len(group) > 1
    ]


def strongly_connected(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            out.append(group)

    sys.setrecursionlimit(10_000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def describe(group, files, edges, crate):
    lines = [f"{crate}: a circle of {len(group)} files"]
    for a in sorted(group):
        for b, names in sorted(edges[a].items()):
            if b in group:
                lines.append(
                    f"  {files[a].relative_to(crate)} -> {files[b].relative_to(crate)}: {', '.join(sorted(names))}"
                )
    return "\n".join(lines)


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in sys.argv[1:]] or sorted(
        [p for p in (root / "crates").iterdir() if p.is_dir()]
        + [p for p in (root / "bindings").iterdir() if (p / "src").is_dir()]
    )
    found = [c for crate in crates for c in circles(crate)]
    for c in found:
        print(c)
    if found:
        print(f"{len(found)} circle(s) of files: move what both sides need below them")
        return 1
    print(f"no circle of files in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
