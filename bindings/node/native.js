'use strict'
// Loads the native addon that `npm run build` puts here.
try {
  module.exports = require('./abridge.node')
} catch (e) {
  e.message = `abridge: the native addon is not built (run \`npm run build\` in ${__dirname}): ${e.message}`
  throw e
}
