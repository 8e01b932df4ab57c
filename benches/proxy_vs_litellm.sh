#!/usr/bin/env bash
# Added latency of abridge serve and of the LiteLLM proxy over the same
# upstream, in one run: the same Rust client sends the same bodies to the
# fake provider directly, through abridge (in process) and through LiteLLM
# (one worker, loopback). LiteLLM comes from PyPI into a virtualenv under
# target/. Loopback only; nothing reaches outside the machine.
#
#   bash benches/proxy_vs_litellm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
venv=${LITELLM_VENV:-$target/litellm-venv}
[ -x "$venv/bin/litellm" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet 'litellm[proxy]'; }

cargo build --release --quiet -p abridge-testkit --bin abridge-fake-provider
"$target/release/abridge-fake-provider" --no-check > "$target/fake-provider.url" &
provider=$!
trap 'kill $provider ${litellm:-} 2>/dev/null || true' EXIT
sleep 1
upstream=$(head -1 "$target/fake-provider.url")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$target/litellm.yaml" <<YAML
model_list:
  - model_name: fake-model
    litellm_params:
      model: openai/fake-model
      api_base: $upstream/v1
      api_key: sk-bench
YAML
# Loopback only, no key: LiteLLM refuses to start keyless unless told so.
LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY=true "$venv/bin/litellm" --config "$target/litellm.yaml" --host 127.0.0.1 --port "$port" --num_workers 1 > "$target/litellm.log" 2>&1 &
litellm=$!
up=
for _ in $(seq 90); do
    curl -sf "http://127.0.0.1:$port/health/liveliness" >/dev/null && { up=1; break; }
    sleep 1
done
[ -n "$up" ] || { echo "LiteLLM did not start: see $target/litellm.log" >&2; exit 1; }

UPSTREAM_URL="$upstream" PEER_NAME=litellm PEER_URL="http://127.0.0.1:$port/v1" cargo bench -p abridge-proxy --bench latency
