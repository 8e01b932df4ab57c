'use strict'
// abridge for Node: compacts OpenAI and Anthropic request bodies and AI SDK
// ModelMessage[] histories in-process. The native addon (native.js, built by
// `npm run build`) takes and returns JSON text; this layer parses, raises
// typed errors and adds the AI SDK prepareStep.

const native = require('./native.js')

/** Base class of abridge's errors; `code` names the kind. */
class AbridgeError extends Error {
  constructor(message, code) {
    super(message)
    this.name = code || 'AbridgeError'
    this.code = code || 'AbridgeError'
  }
}
/** The messages, body or JSON cannot be read. */
class InputError extends AbridgeError {}
/** An option or the config is wrong. */
class ConfigError extends AbridgeError {}
/** What compaction may not touch is already over the target. */
class CannotShrinkError extends AbridgeError {}
/** Any other refusal of the engine. */
class EngineError extends AbridgeError {}

const classes = { InputError, ConfigError, CannotShrinkError, EngineError }

function typed(code, message) {
  const Class = classes[code]
  return Class ? new Class(message, code) : new AbridgeError(message, code)
}

function call(f) {
  try {
    return f()
  } catch (e) {
    if (e && typeof e.code === 'string' && classes[e.code]) throw typed(e.code, e.message)
    throw e
  }
}

const OPTION_KEYS = ['format', 'targetTokens', 'triggerTokens', 'config', 'preset', 'model', 'tokenizer', 'store', 'source', 'recall']

/** The options the engine reads, as JSON; other keys are the caller's. */
function optionsJson(options, format) {
  const o = {}
  for (const k of OPTION_KEYS) if (options && options[k] !== undefined) o[k] = options[k]
  if (format) o.format = format
  return JSON.stringify(o)
}

function compacted(text, key) {
  const r = JSON.parse(text)
  if (r.error) throw typed(r.error.code, r.error.message)
  return { [key]: r.value, report: r.report }
}

/**
 * Compacts a Chat Completions, Anthropic, Responses or Gemini request body
 * (or a bare list of its messages, items or contents) to `options.targetTokens` (or the config's target). Returns
 * `{ body, report }`, the body in the shape it was given.
 */
function compact(body, options = {}) {
  return compacted(call(() => native.compact(JSON.stringify(body), optionsJson(options))), 'body')
}

/** `compact` off the main thread: for LLM summarizers, which take seconds. */
async function compactAsync(body, options = {}) {
  const text = await call(() => native.compactAsync(JSON.stringify(body), optionsJson(options)))
  return compacted(text, 'body')
}

/** Compacts AI SDK `ModelMessage[]`; returns `{ messages, report }`. */
function compactModelMessages(messages, options = {}) {
  const text = call(() => native.compact(JSON.stringify(messages), optionsJson(options, 'ai-sdk')))
  return compacted(text, 'messages')
}

/**
 * Every conversation in a file's text (request bodies, AI SDK messages,
 * Claude Code logs, agent trajectories) as `to`: 'openai', 'anthropic',
 * 'responses', 'gemini' or 'ai-sdk'. Returns an array (a tau-bench file holds many runs).
 */
function convert(text, { to }) {
  return JSON.parse(call(() => native.convert(String(text), to)))
}

/** Tokens of a body or list of messages, as the model counts them. */
function countTokens(body, options = {}) {
  return call(() => native.countTokens(JSON.stringify(body), optionsJson(options)))
}

/** Tool-pairing and role violations (`[]`: valid). */
function validate(body, options = {}) {
  return JSON.parse(call(() => native.validate(JSON.stringify(body), optionsJson(options))))
}

/**
 * A history an agent loop grows: `push` what it adds, `turn()` before each
 * model call, send `messages`. A push costs the new messages only.
 */
class Session {
  #native
  #listeners = []
  #messages = null

  constructor(initial, options = {}) {
    const init = initial === undefined || initial === null ? null : JSON.stringify(initial)
    this.#native = call(() => new native.Session(init, optionsJson(options)))
  }

  /** Appends a message or an array of messages; returns the tokens they add. */
  push(messages) {
    const n = call(() => this.#native.push(JSON.stringify(messages)))
    this.#messages = Array.isArray(this.#messages) ? this.#messages.concat(messages) : null
    this.#flush()
    return n
  }

  /**
   * Checks the triggers (with the provider's reported prompt tokens, when
   * known) and compacts when one fires: `{ tokens, compacted, report,
   * duration_us, status }`; `status` is the note for the agent when
   * `[agent] status_every` says one is due (send it this once), else null.
   */
  turn({ usage } = {}) {
    const t = JSON.parse(call(() => this.#native.turn(usage ?? null)))
    if (t.compacted) this.#messages = null
    this.#flush()
    return t
  }

  /** The history to send now. */
  get messages() {
    if (!this.#messages) this.#messages = JSON.parse(call(() => this.#native.messages()))
    return this.#messages
  }

  /** Tokens of the history now. */
  get tokens() {
    return this.#native.tokens
  }

  /**
   * The recall tool's declaration, `{ name, description, parameters }` (a
   * JSON Schema), or null with `[recall]` off. Placeholders and briefings
   * name what they replaced by a handle (`abr_…`): give the model this tool
   * and answer its calls with `recall`.
   */
  recallTool() {
    const text = call(() => this.#native.recallTool())
    return text === null || text === undefined ? null : JSON.parse(text)
  }

  /**
   * The recall tool as a plain function: the original `handle` names (in
   * pages when large), or, given `{ query }` in place of a handle, the lines
   * of this session's originals that hold it under their handles; else why
   * there is none.
   */
  recall(handle, page) {
    const args = typeof handle === 'object' && handle !== null ? { ...handle } : { handle }
    if (page !== undefined) args.page = page
    return this.recallAnswer(args).text
  }

  /** Answers a call given its arguments (an object or the JSON a model wrote): `{ text, pieces, isError, page, pages, bytes, handle }`. */
  recallAnswer(args) {
    let text = typeof args === 'string' ? args : JSON.stringify(args)
    if (typeof args === 'string') {
      try {
        JSON.parse(args)
      } catch {
        // Not JSON: answered as a malformed call, not thrown.
        text = JSON.stringify({ unparsed: args })
      }
    }
    const a = JSON.parse(call(() => this.#native.recall(text)))
    this.#flush()
    return {
      text: a.pieces.filter((p) => p.type === 'text').map((p) => p.text).join('\n'),
      pieces: a.pieces,
      isError: a.is_error,
      page: a.page,
      pages: a.pages,
      bytes: a.bytes,
      handle: a.handle,
    }
  }

  /**
   * The compact tool's declaration, `{ name, description, parameters }`, or
   * null unless `[agent] compact_tool` is on (the `mycoder` preset): give the
   * model this tool and answer its calls with `compactHistory`.
   */
  compactTool() {
    const text = call(() => this.#native.compactTool())
    return text === null || text === undefined ? null : JSON.parse(text)
  }

  /**
   * Answers a call of the compact tool given its arguments (an object or the
   * JSON a model wrote: `preserve_recent_messages`, 10 by default, and
   * `custom_prompt`) by compacting the history now: `{ text, isError,
   * compacted, tokensBefore, tokensAfter }`; `text` is the tool's result.
   */
  compactHistory(args = {}) {
    let text = typeof args === 'string' ? args : JSON.stringify(args ?? {})
    try {
      JSON.parse(text)
    } catch {
      text = '{}'
    }
    const a = JSON.parse(call(() => this.#native.compactHistory(text)))
    if (a.compacted) this.#messages = null
    this.#flush()
    return {
      text: a.text,
      isError: a.is_error,
      compacted: a.compacted,
      tokensBefore: a.tokens_before,
      tokensAfter: a.tokens_after,
    }
  }

  /** Calls `listener` with every engine event (`history_size`, `history_compacted`, …). */
  onEvent(listener) {
    this.#listeners.push(listener)
    return this
  }

  #flush() {
    for (const text of this.#native.takeEvents()) {
      const event = JSON.parse(text)
      for (const l of this.#listeners) l(event)
    }
  }
}

/**
 * A `prepareStep` for `generateText` / `streamText` agents: it keeps the
 * step's messages in a Session and returns the compacted history for the
 * step once a trigger has fired (`undefined` until then, so the SDK sends
 * its own). Only the messages the loop appended since the last step are
 * read, and the compacted prefix stays the same from step to step (prompt
 * caches hold). `options`: `triggerTokens`, `targetTokens`, `model`,
 * `config`, `tokenizer`, and `onCompact(report)`.
 *
 * `prepareStep.tools()` is the recall tool as an AI SDK `tool()` under its
 * name, to spread into the agent's tools: placeholders and briefings name
 * what they replaced by a handle, and the model gets an original back by
 * calling it (`{}` with `[recall]` off). Under `[agent]` (the `mycoder`
 * preset) it holds the compact tool too, which the model calls to compact
 * its own history, and every `status_every`-th step carries a status note.
 */
function abridgePrepareStep(options = {}) {
  let session = null
  let seen = []
  let compactedOnce = false
  const stats = { sessions: 0, messagesRead: 0, compactions: 0 }
  const prepareStep = async ({ messages }) => {
    try {
      return step(messages)
    } catch (e) {
      // Never block the agent: the step goes on with its own messages.
      if (options.onError) options.onError(e)
      session = null
      return undefined
    }
  }
  prepareStep.stats = stats
  prepareStep.tools = () => ({
    ...recallTools(() => session, options),
    ...compactTools(() => session, options, () => {
      compactedOnce = true
      stats.compactions += 1
    }),
  })
  return prepareStep

  function step(messages) {
    // The SDK copies its messages between generateText calls: compare by value (same references skip).
    const appended = seen.length <= messages.length && seen.every((m, i) => same(m, messages[i]))
    if (!session || !appended) {
      session = new Session(messages, { ...options, format: 'ai-sdk' })
      compactedOnce = false
      stats.sessions += 1
      stats.messagesRead += messages.length
    } else if (messages.length > seen.length) {
      session.push(messages.slice(seen.length))
      stats.messagesRead += messages.length - seen.length
    }
    seen = messages.slice()
    const turn = session.turn()
    if (turn.compacted) {
      compactedOnce = true
      stats.compactions += 1
      if (options.onCompact) options.onCompact(turn.report)
    }
    if (turn.status) {
      // The note goes this once, after the history the model is sent.
      const sent = compactedOnce ? session.messages : messages
      return { messages: [...sent, { role: 'user', content: turn.status }] }
    }
    return compactedOnce ? { messages: session.messages } : undefined
  }
}

/** The compact tool (`[agent] compact_tool`) as AI SDK tools (`{ [name]: tool }`), compacting `current()`'s session. */
function compactTools(current, options, compacted) {
  const declaration = new Session(null, { ...options, format: 'ai-sdk' }).compactTool()
  return sdkTools(declaration, (input) => {
    const session = current()
    if (!session) return 'Nothing to compact yet. No changes made.'
    const answer = session.compactHistory(input ?? {})
    if (answer.compacted) compacted()
    return answer.text
  })
}

/** The recall tool as AI SDK tools (`{ [name]: tool }`) answering from `current()`'s session. */
function recallTools(current, options) {
  const declaration = new Session(null, { ...options, format: 'ai-sdk' }).recallTool()
  return sdkTools(declaration, (input) => {
    const session = current()
    if (!session) return 'No original is kept yet: nothing has been compacted.'
    return session.recallAnswer(input).text
  })
}

/** A tool's declaration (`{ name, description, parameters }`, or null: none) as AI SDK tools that `answer` executes. */
function sdkTools(declaration, answer) {
  if (!declaration) return {}
  // The AI SDK is the caller's: it is loaded only when its tool is asked for.
  const { tool, jsonSchema } = require('ai')
  const made = tool({
    description: declaration.description,
    inputSchema: jsonSchema(declaration.parameters),
    execute: async (input) => answer(input),
  })
  return { [declaration.name]: made }
}

/** Deep equality of message values; keys holding `undefined` count as absent. */
function same(a, b) {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]))
  if (ArrayBuffer.isView(a) || a instanceof URL) return String(a) === String(b) && a.constructor === b.constructor
  const ka = Object.keys(a).filter((k) => a[k] !== undefined)
  const kb = Object.keys(b).filter((k) => b[k] !== undefined)
  return ka.length === kb.length && ka.every((k) => same(a[k], b[k]))
}

module.exports = {
  compact,
  compactAsync,
  compactModelMessages,
  convert,
  countTokens,
  validate,
  Session,
  abridgePrepareStep,
  AbridgeError,
  InputError,
  ConfigError,
  CannotShrinkError,
  EngineError,
}
