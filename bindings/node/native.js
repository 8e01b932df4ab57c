'use strict'
// Loads the native addon: the one `npm run build` puts here (a checkout),
// or the prebuilt one of this platform's package (an install from npm:
// `abridge-<platform>-<arch>[-<libc>]`, an optional dependency).
const fs = require('node:fs')
const path = require('node:path')

function platformPackage() {
  const { platform, arch } = process
  if (platform !== 'linux') return `abridge-${platform}-${arch}`
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
  return `abridge-linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

const local = path.join(__dirname, 'abridge.node')
if (fs.existsSync(local)) {
  module.exports = require(local)
} else {
  const name = platformPackage()
  try {
    module.exports = require(name)
  } catch (e) {
    e.message =
      `abridge: no native addon for this platform: neither ${local} (run \`npm run build\` in ` +
      `${__dirname}) nor the package ${name}: ${e.message}`
    throw e
  }
}
