#!/usr/bin/env bash
# Builds every artifact a user installs, into dist/:
#   abridge-VERSION-TARGET.tar.gz         the CLI (stripped), README, licenses
#   abridge-VERSION-*.whl, .tar.gz        the Python wheel (abi3, manylinux) and sdist
#   abridge-VERSION.tgz                   the npm package (JS, types)
#   abridge-PLATFORM-VERSION.tgz          its per-platform package (the prebuilt addon)
# and checks that the crates are ready for crates.io (cargo publish
# --workspace --dry-run). The version is the workspace's (Cargo.toml); every
# artifact carries it. Release code is built once, in the `dist` profile.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
dist=$root/dist
stage=$target/package
rm -rf "$dist" "$stage"
mkdir -p "$dist" "$stage"

version=$(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "abridge-cli"))')
node_version=$(node -p 'require("./bindings/node/package.json").version')
if [ "$node_version" != "$version" ]; then
    echo "bindings/node/package.json says $node_version, the workspace $version" >&2
    exit 1
fi
echo "== abridge $version"

echo "== the CLI"
cargo build --profile dist --locked -p abridge-cli
triple=$(rustc -vV | sed -n 's/^host: //p')
name=abridge-$version-$triple
mkdir -p "$stage/$name"
cp "$target/dist/abridge" README.md LICENSE-MIT LICENSE-APACHE "$stage/$name/"
tar -C "$stage" -czf "$dist/$name.tar.gz" "$name"

echo "== the Python wheel and sdist"
venv=$target/package-venv
[ -x "$venv/bin/maturin" ] || {
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check maturin==1.16.0
}
"$venv/bin/maturin" build --profile dist --locked -m bindings/python/Cargo.toml --out "$dist" --quiet
"$venv/bin/maturin" sdist -m bindings/python/Cargo.toml --out "$dist"

echo "== the npm packages"
cargo build --profile dist --locked -p abridge-node
platform=$(node -p 'const {platform, arch} = process; platform === "linux"
    ? `linux-${arch}-${process.report.getReport().header.glibcVersionRuntime ? "gnu" : "musl"}`
    : `${platform}-${arch}`')
native=$stage/npm-platform
main=$stage/npm-main
mkdir -p "$native" "$main"
cp "$target/dist/libabridge_node.so" "$native/abridge.$platform.node"
cp README.md LICENSE-MIT LICENSE-APACHE "$native/"
cp bindings/node/index.js bindings/node/index.d.ts bindings/node/native.js README.md \
    LICENSE-MIT LICENSE-APACHE "$main/"
VERSION=$version PLATFORM=$platform NATIVE=$native MAIN=$main node - <<'EOF'
const fs = require('node:fs')
const { VERSION, PLATFORM, NATIVE, MAIN } = process.env
const [os, cpu, libc] = PLATFORM.split('-')
const source = require(`${process.cwd()}/bindings/node/package.json`)
const platform = {
  name: `abridge-${PLATFORM}`,
  version: VERSION,
  description: `The prebuilt native addon of the abridge package for ${PLATFORM}.`,
  license: source.license,
  main: `abridge.${PLATFORM}.node`,
  files: [`abridge.${PLATFORM}.node`, 'README.md', 'LICENSE-MIT', 'LICENSE-APACHE'],
  os: [os],
  cpu: [cpu],
  ...(libc ? { libc: [libc === 'gnu' ? 'glibc' : 'musl'] } : {}),
}
const main = {
  name: source.name,
  version: VERSION,
  description: source.description,
  license: source.license,
  main: source.main,
  types: source.types,
  files: ['index.js', 'index.d.ts', 'native.js', 'README.md', 'LICENSE-MIT', 'LICENSE-APACHE'],
  engines: source.engines,
  optionalDependencies: { [platform.name]: VERSION },
}
fs.writeFileSync(`${NATIVE}/package.json`, JSON.stringify(platform, null, 2) + '\n')
fs.writeFileSync(`${MAIN}/package.json`, JSON.stringify(main, null, 2) + '\n')
EOF
(cd "$native" && npm pack --silent --pack-destination "$dist" >/dev/null)
(cd "$main" && npm pack --silent --pack-destination "$dist" >/dev/null)

echo "== the crates (cargo publish --dry-run, in dependency order)"
# --no-verify: the workspace's own tests build the same code.
if ! cargo publish --workspace --dry-run --no-verify --locked --allow-dirty >"$stage/publish.log" 2>&1; then
    cat "$stage/publish.log" >&2
    exit 1
fi
grep -E '^\s*Uploading' "$stage/publish.log" | sed 's/^ *Uploading/  ready:/'

echo "== dist/"
(cd "$dist" && for f in *; do printf '%10s  %s\n' "$(du -h "$f" | cut -f1)" "$f"; done)
echo "the CLI binary: $(du -h "$target/dist/abridge" | cut -f1)"
