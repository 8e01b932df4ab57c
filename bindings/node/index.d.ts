// Type declarations of the abridge Node package (index.js).

/** A format of messages: OpenAI Chat Completions, Anthropic Messages, OpenAI Responses or Gemini request bodies, or AI SDK `ModelMessage[]`. */
export type Format = 'openai' | 'anthropic' | 'responses' | 'gemini' | 'ai-sdk'

/** The tokenizers abridge counts with. */
export type Tokenizer = 'o200k_base' | 'cl100k_base' | 'claude_calibrated' | 'open_calibrated' | 'estimate'

/** A seed system's settings (see the book's Presets page). */
export type Preset = 'pilo-clipping' | 'pilo-compaction' | 'compaction-note' | 'stagewise'

/** Options of every call. */
export interface Options {
  /** Format of the messages (detected when absent). */
  format?: Format
  /** Compact to at most this many tokens (default: the config's target, or one derived from the model's window). */
  targetTokens?: number
  /** Compact when the history exceeds this many tokens (a Session's trigger). */
  triggerTokens?: number
  /** The engine config: an object with the keys of abridge.toml, or the path of such a file. */
  config?: string | Record<string, unknown>
  /** Start from a seed system's settings; `config`'s keys still win. */
  preset?: Preset
  /** Model name, for its window and tokenizer (default: the body's `model`). */
  model?: string
  /** Tokenizer (default: the model's own). */
  tokenizer?: Tokenizer
  /** Record every compaction in this snapshot store (a SQLite file), for `abridge log`/`show` and the dashboard. */
  store?: string
  /** The name compactions are recorded under (default `abridge-embed`). */
  source?: string
  /** Handles on replaced content and the recall tool (default: the config's `[recall] enabled`, on). */
  recall?: boolean
}

/** The recall tool's declaration. */
export interface RecallTool {
  name: string
  description: string
  /** JSON Schema of its input, `{ handle, page? }`. */
  parameters: Record<string, unknown>
}

/** The answer to one call of the recall tool. */
export interface RecallAnswer {
  /** What goes back to the model (images left out). */
  text: string
  /** Text and images (`{ type: 'image', url }`). */
  pieces: Array<{ type: 'text'; text: string } | { type: 'image'; url: string }>
  /** Nothing was recalled: an unknown or expired handle, or a malformed call. */
  isError: boolean
  page: number
  pages: number
  bytes: number
  handle: string | null
}

/** One policy's work in a compaction. */
export interface PolicyRun {
  policy: string
  items: number
  tokens_saved: number
  [key: string]: unknown
}

/** What a compaction did (the engine's report). */
export interface Report {
  reason: 'forced' | 'tokens' | 'window' | 'usage' | 'cadence' | null
  compacted: boolean
  tokens_before: number
  tokens_after: number
  messages_before: number
  messages_after: number
  tail_iterations: number
  target: number | null
  policies: PolicyRun[]
  summarizer: string | null
  attempts: Array<{ summarizer: string; ms: number; outcome: unknown }>
  snapshot: string | null
  events: AbridgeEvent[]
  duration_us: number
}

/** An engine event; `event` names it (`history_size`, `history_compacted`, …). */
export interface AbridgeEvent {
  event: string
  [key: string]: unknown
}

/** A tool-pairing or role violation. */
export interface Violation {
  rule: string
  index: number
  message: string
}

/** What one Session turn did. */
export interface Turn {
  tokens: number
  compacted: boolean
  report: Report | null
  /** Engine time spent in the turn, in microseconds. */
  duration_us: number
  /** The status note for the agent when `[agent] status_every` says one is due (send it this once), else null. */
  status: string | null
}

/** The compact tool's declaration (`[agent] compact_tool`). */
export interface CompactTool {
  name: string
  description: string
  /** JSON Schema of its input, `{ preserve_recent_messages?, custom_prompt? }`. */
  parameters: Record<string, unknown>
}

/** What a call of the compact tool came to. */
export interface CompactAnswer {
  /** The tool's result, for the model. */
  text: string
  /** The compaction failed (the text says why). */
  isError: boolean
  /** The history was rewritten. */
  compacted: boolean
  tokensBefore: number
  tokensAfter: number
}

/** Compacts a Chat Completions, Anthropic, Responses or Gemini body (or a bare list of its messages); the body comes back in the shape given. */
export function compact<B>(body: B, options?: Options): { body: B; report: Report }
/** `compact` off the main thread (for LLM summarizers). */
export function compactAsync<B>(body: B, options?: Options): Promise<{ body: B; report: Report }>
/** Compacts AI SDK `ModelMessage[]`. */
export function compactModelMessages<M>(messages: M[], options?: Options): { messages: M[]; report: Report }
/** Every conversation of a file's text (any format abridge reads), written as `to`. */
export function convert(text: string, options: { to: Format }): unknown[]
/** Tokens of a body or list of messages. */
export function countTokens(body: unknown, options?: Options): number
/** Tool-pairing and role violations (`[]`: valid). */
export function validate(body: unknown, options?: Options): Violation[]

/** A history an agent loop grows; a push costs the new messages only. */
export class Session<M = unknown> {
  constructor(initial?: M[] | Record<string, unknown> | null, options?: Options)
  /** Appends a message or messages; returns the tokens they add. */
  push(messages: M | M[]): number
  /** Checks the triggers and compacts when one fires. */
  turn(options?: { usage?: number }): Turn
  /** The history to send now. */
  readonly messages: M[]
  /** Tokens of the history now. */
  readonly tokens: number
  /** Calls `listener` with every engine event. */
  onEvent(listener: (event: AbridgeEvent) => void): this
  /** The recall tool's declaration, or null with `[recall]` off. */
  recallTool(): RecallTool | null
  /** The recall tool as a plain function: the original a handle names, or (given `{ query }`) the lines of this session's originals that hold it; else why there is none. */
  recall(handle: string | { query: string }, page?: number): string
  /** Answers a call of the recall tool given its arguments (an object or the JSON a model wrote). */
  recallAnswer(args: { handle?: string; query?: string; page?: number } | string): RecallAnswer
  /** The compact tool's declaration, or null unless `[agent] compact_tool` is on. */
  compactTool(): CompactTool | null
  /** Answers a call of the compact tool by compacting the history now. */
  compactHistory(args?: { preserve_recent_messages?: number; custom_prompt?: string } | string): CompactAnswer
}

/** Options of `abridgePrepareStep`. */
export interface PrepareStepOptions extends Omit<Options, 'format'> {
  /** Called with the report of each compaction. */
  onCompact?: (report: Report) => void
  /** Called when a step could not be compacted (the step goes on with its own messages). */
  onError?: (error: unknown) => void
}

/** A `prepareStep` for `generateText` / `streamText` that returns the compacted messages once a trigger has fired. */
export function abridgePrepareStep<M = unknown>(
  options?: PrepareStepOptions,
): ((step: { messages: M[] }) => Promise<{ messages: M[] } | undefined>) & {
  /** Sessions started (1 unless the history was edited), messages read, compactions. */
  readonly stats: { sessions: number; messagesRead: number; compactions: number }
  /** The recall tool, and the compact tool when `[agent] compact_tool` is on, as AI SDK `tool()`s under their names, to spread into the agent's tools. */
  tools(): Record<string, unknown>
}

/** Base class of abridge's errors; `code` names the kind. */
export class AbridgeError extends Error {
  readonly code: 'InputError' | 'ConfigError' | 'CannotShrinkError' | 'EngineError' | string
}
export class InputError extends AbridgeError {}
export class ConfigError extends AbridgeError {}
export class CannotShrinkError extends AbridgeError {}
export class EngineError extends AbridgeError {}
