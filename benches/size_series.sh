#!/usr/bin/env bash
# Cost against history size: `abridge compact` (release, no store) on
# synthetic histories from benches/workload.py, wall time and peak RSS each
# (GNU time). Tiny: alternating one-word messages, 10k to 1M; toolchat: the
# 10,000-message tool-using chat of issue 32 (about 8 MB). `abridge stats`
# on the same files shows what reading and counting alone cost.
#
#   benches/size_series.sh [SIZES...]     # default: 10000 100000 300000 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
out="$target_dir/bench/sizes"
mkdir -p "$out"
cargo build --release --quiet -p abridge-cli
abridge="$target_dir/release/abridge"
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }

run() { # label, file, command...
    local label=$1 file=$2; shift 2
    local t
    /usr/bin/time -o "$out/time" -f "%e %M" "$@" "$file" > /dev/null 2>&1
    t=$(tail -1 "$out/time")
    printf "%-34s %8.2f s %8.0f MB\n" "$label" "${t% *}" "$(( ${t#* } / 1024 ))"
}

[ -f "$out/toolchat.json" ] || python3 benches/workload.py toolchat 10000 > "$out/toolchat.json"
printf "%-34s %10s %11s\n" "workload" "time" "peak RSS"
run "toolchat 10k, stats" "$out/toolchat.json" "$abridge" stats
run "toolchat 10k, compact to 128k" "$out/toolchat.json" "$abridge" compact --no-store --target-tokens 128000
for n in "${@:-10000 100000 300000 1000000}"; do
    for size in $n; do
        f="$out/tiny-$size.json"
        [ -f "$f" ] || python3 benches/workload.py tiny "$size" > "$f"
        run "tiny $size, stats" "$f" "$abridge" stats
        run "tiny $size, compact to 128k" "$f" "$abridge" compact --no-store --target-tokens 128000
    done
done
