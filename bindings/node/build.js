#!/usr/bin/env node
// Builds the native addon for this machine from source with cargo and puts
// it beside index.js as abridge.node. `npm run build` (release) or
// `npm run build:debug` (the dev profile, sharing the workspace's test build).
'use strict'
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const release = !process.argv.includes('--debug')
const args = ['build', '-p', 'abridge-node', '--message-format=json-render-diagnostics']
if (release) args.push('--release')
if (process.argv.includes('--locked')) args.push('--locked')
const out = execFileSync('cargo', args, {
  cwd: __dirname,
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
  maxBuffer: 1 << 28,
})
const library = out
  .split('\n')
  .filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line))
  .filter((m) => m.reason === 'compiler-artifact' && m.target.name === 'abridge_node')
  .flatMap((m) => m.filenames)
  .find((f) => /\.(so|dylib|dll)$/.test(f))
if (!library) {
  console.error('build.js: cargo built no abridge_node library')
  process.exit(1)
}
fs.copyFileSync(library, path.join(__dirname, 'abridge.node'))
console.log(`abridge.node <- ${path.relative(process.cwd(), library)}`)
