#!/usr/bin/env bash
# Every test: the Rust workspace, the Node package (built from source, tested
# with the AI SDK), then the official OpenAI and Anthropic Python SDKs and
# the AI SDK (Node) running tool loops through `abridge serve` against the
# fake provider, and real agent clients as shipped (Claude Code, the OpenAI
# Agents SDK) driven by a scripted model through it, and traces read back
# from Arize Phoenix (a real OTLP receiver); last, every artifact a
# user installs is built (scripts/package.sh) and installed where no Rust
# toolchain is (scripts/test-artifacts.sh). Python packages go to a
# virtualenv under target/, Node packages come from committed lockfiles (`npm ci`).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Rust"
cargo test --workspace --locked
cargo build --workspace --bins --locked --quiet

target_dir=${CARGO_TARGET_DIR:-target}
venv="$target_dir/sdk-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    -r sdk-tests/python/requirements.txt -r bindings/python/tests/requirements.txt

echo "== Python package (bindings/python): API, corpus, a LangChain agent loop"
# Built from source by pip (maturin); the dev profile reuses the test build.
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install --quiet --disable-pip-version-check ./bindings/python
"$venv/bin/python" -m unittest discover -s bindings/python/tests

echo "== Python SDKs (openai, anthropic) through the proxy"
"$venv/bin/python" sdk-tests/python/test_proxy.py

echo "== The docs' Python samples, as written (those with LangChain; the Agents SDK's below)"
"$venv/bin/python" sdk-tests/python/test_docs.py

echo "== Node package (bindings/node): API, corpus, an AI SDK agent loop"
(cd bindings/node && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build:debug && npm test)

echo "== The dashboard in Chromium (headless, playwright-core); screenshots in target/ui-screenshots"
(cd crates/ui/browser-tests && npm ci --no-audit --no-fund --loglevel=error && node --test)

echo "== AI SDK (Node) through the proxy"
(cd sdk-tests/node && npm ci --no-audit --no-fund --loglevel=error && node --test)

echo "== Real agent clients (Claude Code, Codex, Gemini CLI, the OpenAI Agents SDK) through the proxy and in-process"
# Claude Code's npm package carries its native binary (pinned in the lockfile).
(cd sdk-tests/clients && npm ci --no-audit --no-fund --loglevel=error)
clients_venv="$target_dir/clients-venv"
[ -x "$clients_venv/bin/python" ] || python3 -m venv "$clients_venv"
"$clients_venv/bin/pip" install --quiet --disable-pip-version-check -r sdk-tests/clients/requirements.txt
# The abridge package too, for the Agents SDK's in-process filter (abridge.agents).
MATURIN_PEP517_ARGS="--profile dev" "$clients_venv/bin/pip" install --quiet --disable-pip-version-check ./bindings/python
"$clients_venv/bin/python" sdk-tests/python/test_clients.py
"$clients_venv/bin/python" sdk-tests/python/test_docs.py
echo "== abridge run with the real agents (Claude Code, Codex, Gemini CLI, OpenCode, Copilot CLI)"
"$clients_venv/bin/python" sdk-tests/python/test_run.py

echo "== Traces into a real OTLP receiver (Arize Phoenix), read back through its API"
traces_venv="$target_dir/traces-venv"
[ -x "$traces_venv/bin/python" ] || python3 -m venv "$traces_venv"
"$traces_venv/bin/pip" install --quiet --disable-pip-version-check -r sdk-tests/python/requirements-traces.txt
"$traces_venv/bin/python" sdk-tests/python/test_traces.py

if [ "${CI:-}" = true ]; then
    # CI's clean clone is thrown away after the run, and the machine's disk is
    # shared: a run once failed on a full disk while packaging. Nothing past
    # this point uses the test build or the clients' packages.
    echo "== CI: freeing the test build ($(du -sh "$target_dir/debug" | cut -f1)) and the clients' packages before packaging"
    rm -rf "$target_dir/debug" sdk-tests/clients/node_modules
fi

echo "== Packages: every artifact built, then installed and used where no Rust toolchain is"
bash scripts/package.sh
bash scripts/test-artifacts.sh
