#!/usr/bin/env bash
# Installs what scripts/package.sh put in dist/ the way users do, where no
# Rust toolchain is on PATH, and uses it:
# - a fresh virtualenv installs the wheel with its LangChain extra and runs
#   the package's own tests (abridge.compact on every corpus conversation,
#   the LangChain middleware in an agent loop);
# - a fresh folder installs the two npm tarballs and compacts a corpus
#   conversation (without the corpus, a generated tool loop) as AI SDK
#   messages, plain and through abridgePrepareStep;
# - the CLI archive, unpacked into an empty folder, compacts the example
#   and prints `serve --help` with a minimal PATH.
# Prints how long each install took.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
work=$target/artifacts
rm -rf "$work"
mkdir -p "$work"
bare=/usr/bin:/bin
if PATH=$bare command -v cargo >/dev/null || PATH=$bare command -v rustc >/dev/null; then
    echo "cargo or rustc is on $bare: the clean installs would not prove anything" >&2
    exit 1
fi
wheel=$(ls dist/abridge-*.whl)
npm_main=$(ls dist/abridge-[0-9]*.tgz)
npm_native=$(ls dist/abridge-*-*-*.tgz | grep -v "^$npm_main$" | head -1)
cli=$(ls dist/abridge-*-unknown-*.tar.gz)
seconds() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }

echo "== the wheel in a fresh virtualenv (no cargo, no rustc)"
python3 -m venv "$work/venv"
t=$(date +%s.%N)
PATH=$bare "$work/venv/bin/pip" install --quiet --disable-pip-version-check \
    "$wheel[langchain]" -c bindings/python/tests/requirements.txt
echo "installed in $(seconds "$t") s"
(cd "$work" && PATH=$bare "$work/venv/bin/python" -m unittest discover -s "$root/bindings/python/tests")

echo "== the npm tarballs in a fresh folder (no cargo)"
mkdir -p "$work/node"
t=$(date +%s.%N)
(cd "$work/node" && echo '{"private": true}' >package.json &&
    PATH=$bare npm install --no-audit --no-fund --loglevel=error "$root/$npm_native" "$root/$npm_main")
echo "installed in $(seconds "$t") s"
(cd "$work/node" && ROOT=$root PATH=$bare node - <<'EOF'
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const abridge = require('abridge')
const corpus = path.join(process.env.ROOT, '../shared/corpus/claude-code_marot-spotter')
// A corpus session, or (without the corpus) a generated tool loop long
// enough for the trigger to fire: 40 reads of 2 KB files.
const file = fs.existsSync(corpus)
  ? path.join(corpus, fs.readdirSync(corpus).find((f) => f.endsWith('.jsonl')))
  : null
const generated = () => [{ role: 'user', content: 'Read every module and summarise it.' }].concat(
  ...Array.from({ length: 40 }, (_, i) => [
    { role: 'assistant', content: [{ type: 'tool-call', toolCallId: `c${i}`, toolName: 'read', input: { path: `src/mod_${i}.rs` } }] },
    { role: 'tool', content: [{ type: 'tool-result', toolCallId: `c${i}`, toolName: 'read',
      output: { type: 'text', value: Array.from({ length: 80 }, (_, k) => `line ${k} of src/mod_${i}.rs`).join('\n') } }] },
  ]))
const messages = file ? abridge.convert(fs.readFileSync(file, 'utf8'), { to: 'ai-sdk' })[0] : generated()
const total = abridge.countTokens(messages)
const target = Math.floor(total * 0.3)
const { messages: out, report } = abridge.compactModelMessages(messages, { targetTokens: target })
assert.ok(report.compacted && report.tokens_after <= target, JSON.stringify(report))
assert.deepEqual(abridge.validate(out), [])
const prepare = abridge.abridgePrepareStep({ triggerTokens: Math.floor(total / 2), targetTokens: target })
prepare({ messages }).then((step) => {
  assert.ok(step, 'the trigger fired: prepareStep returns compacted messages')
  assert.ok(abridge.countTokens(step.messages) <= target, 'under the target')
  console.log(`${file ? path.basename(file) : 'generated 40-step loop'}: ${total} -> ${report.tokens_after} tokens (AI SDK messages), prepareStep ${prepare.stats.compactions} compaction`)
})
EOF
)

echo "== the CLI archive in an empty folder"
mkdir -p "$work/cli"
t=$(date +%s.%N)
tar -C "$work/cli" -xzf "$cli"
echo "unpacked in $(seconds "$t") s"
bin=$(ls -d "$work"/cli/abridge-*/)abridge
cp examples/web-agent.anthropic.json "$work/cli/"
(cd "$work/cli" && env -i PATH=$bare HOME="$work/cli" "$bin" compact web-agent.anthropic.json \
    --target-tokens 2500 --keep-last 1 --no-store >compacted.json)
(cd "$work/cli" && env -i PATH=$bare HOME="$work/cli" "$bin" validate compacted.json)
env -i PATH=$bare "$bin" serve --help | head -3
env -i PATH=$bare "$bin" --version
