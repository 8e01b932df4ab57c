#!/usr/bin/env bash
# The Python and Node packages' compact() against the same call in Rust, on
# the corpus's longest conversation (a Claude Code session, as an Anthropic
# body) compacted to 30% of its tokens; serialization included on every
# side (Rust: JSON text in and out; Python: a dict in and out; Node: an
# object in and out). Release builds. Needs ../shared/corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
out="$target_dir/bench"
mkdir -p "$out"
file=../shared/corpus/claude-code_marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl
[ -f "$file" ] || { echo "corpus not found: $file" >&2; exit 1; }

cargo build --release --quiet -p abridge-cli
"$target_dir/release/abridge" convert "$file" --to anthropic --compact > "$out/longest.json" 2>/dev/null
tokens=$("$target_dir/release/abridge" stats --json "$out/longest.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
target=$((tokens * 3 / 10))
echo "body: $(wc -c < "$out/longest.json") bytes, $tokens tokens, target $target"

echo "== Rust (abridge-embed: JSON text in, JSON text out)"
ABRIDGE_BENCH_BODY="$(realpath "$out/longest.json")" ABRIDGE_BENCH_TARGET=$target \
    cargo bench --quiet -p abridge-embed --bench compact 2>&1 | grep -E "median|compact_json_text"

echo "== Python (pip install ./bindings/python, release)"
venv="$out/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check ./bindings/python
"$venv/bin/python" - "$out/longest.json" "$target" <<'PY'
import json, statistics, sys, time
import abridge
body = json.load(open(sys.argv[1]))
target = int(sys.argv[2])
times = []
for _ in range(20):
    start = time.perf_counter()
    out = abridge.compact(body, target_tokens=target)
    times.append((time.perf_counter() - start) * 1000)
print(f"python compact: median {statistics.median(times):.2f} ms (min {min(times):.2f}), {out['report']['tokens_after']} tokens after")
PY

echo "== Node (npm run build, release)"
(cd bindings/node && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build 2>/dev/null >/dev/null)
node - "$out/longest.json" "$target" <<'JS'
const abridge = require('./bindings/node')
const fs = require('fs')
const body = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const target = Number(process.argv[3])
const times = []
let out
for (let i = 0; i < 20; i++) {
  const start = process.hrtime.bigint()
  out = abridge.compact(body, { targetTokens: target })
  times.push(Number(process.hrtime.bigint() - start) / 1e6)
}
times.sort((a, b) => a - b)
const median = (times[9] + times[10]) / 2
console.log(`node compact: median ${median.toFixed(2)} ms (min ${times[0].toFixed(2)}), ${out.report.tokens_after} tokens after`)
JS
