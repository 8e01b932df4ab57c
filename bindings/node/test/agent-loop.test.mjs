// A Pilo-shaped web agent on the AI SDK's own mock model: page snapshots in
// <EXTERNAL-CONTENT> blocks, validation feedback when it claims to be done
// too early, 50 model calls. abridgePrepareStep keeps every step's history
// under its trigger, the SDK's modelMessageSchema accepts every step's
// messages, and every tool call keeps its result.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { generateText, tool, stepCountIs, modelMessageSchema } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { z } from 'zod'

const require = createRequire(import.meta.url)
const abridge = require('..')

const TRIGGER = 20_000
const TARGET = 12_000
const ROUNDS = 10
const STEPS = 5

/** A page snapshot as Pilo's browser tools return it. */
function snapshot(page) {
  const rows = Array.from({ length: 90 }, (_, k) =>
    `- row "Flight LX${page}${k} Zurich → Lisbon 2026-12-0${(k % 9) + 1} CHF ${180 + k}" [ref=e${page}_${k}]`)
  return `<EXTERNAL-CONTENT>\nPage: https://fly.example/results?page=${page}\n${rows.join('\n')}\n</EXTERNAL-CONTENT>`
}

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } }

test('an AI SDK agent loop plateaus under the trigger with valid messages at every step', async (t) => {
  let call = 0
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      call += 1
      if (call % STEPS === 0) {
        return { content: [{ type: 'text', text: `Done: the cheapest fare is on page ${call}.` }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      }
      const input = call % 2 ? { url: `https://fly.example/results?page=${call}` } : { ref: `e${call}_3` }
      return {
        content: [{ type: 'tool-call', toolCallId: `call_${call}`, toolName: call % 2 ? 'goto' : 'click', input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      }
    },
  })
  const tools = {
    goto: tool({ description: 'Open a URL', inputSchema: z.object({ url: z.string() }), execute: async ({ url }) => snapshot(url.split('=').pop()) }),
    click: tool({ description: 'Click an element', inputSchema: z.object({ ref: z.string() }), execute: async ({ ref }) => snapshot(ref) }),
  }
  const compactions = []
  const dir = mkdtempSync(path.join(tmpdir(), 'abridge-pilo-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const store = path.join(dir, 'store.sqlite')
  const inner = abridge.abridgePrepareStep({ triggerTokens: TRIGGER, targetTokens: TARGET, store, source: 'pilo-loop', onCompact: (r) => compactions.push(r) })
  const sent = []
  const prepareStep = async (step) => {
    const out = await inner(step)
    const messages = out ? out.messages : step.messages
    modelMessageSchema.array().parse(messages)
    assert.deepEqual(abridge.validate(messages, { format: 'ai-sdk' }), [], `step ${sent.length}: pairing`)
    sent.push({ tokens: abridge.countTokens(messages), original: abridge.countTokens(step.messages) })
    return out
  }

  const messages = [
    { role: 'system', content: 'You are Pilo, a web agent. Use the browser tools; answer with the final result.' },
    { role: 'user', content: 'Find the cheapest flight from Zurich to Lisbon in the first week of December 2026.' },
  ]
  for (let round = 0; round < ROUNDS; round++) {
    const result = await generateText({ model, messages, tools, prepareStep, stopWhen: stepCountIs(STEPS), allowSystemInMessages: true })
    messages.push(...result.response.messages)
    messages.push({ role: 'user', content: `[validation] Round ${round}: the answer does not name the flight number and its ref. Continue browsing.` })
  }

  assert.equal(sent.length, ROUNDS * STEPS, 'one prepareStep per model call')
  assert.ok(compactions.length > 0, 'compacted')
  const peak = Math.max(...sent.map((s) => s.tokens))
  const last = sent[sent.length - 1]
  assert.ok(peak <= TRIGGER, `peak ${peak} over the trigger ${TRIGGER}`)
  assert.ok(last.original > 3 * TRIGGER, `the uncompacted history (${last.original}) should dwarf the trigger`)
  // Plateau: the second half of the run is no bigger than the first.
  const half = (a) => Math.max(...a.map((s) => s.tokens))
  assert.ok(half(sent.slice(25)) <= TRIGGER && half(sent.slice(25)) <= half(sent.slice(0, 25)) * 1.5)
  // Each message was read once, into one session: a step costs what it added.
  assert.equal(inner.stats.sessions, 1)
  // (The last round's answer and feedback are never sent.)
  assert.equal(inner.stats.messagesRead, messages.length - 2, 'every message read once')
  for (const r of compactions) assert.ok(r.tokens_after <= TARGET, `compacted to ${r.tokens_after}`)
  // Every compaction was recorded in the store, for `abridge log` and the dashboard.
  assert.ok(compactions.every((r) => Number.isInteger(r.snapshot)), 'each report names its snapshot')
  assert.deepEqual(compactions.map((r) => r.snapshot), compactions.map((_, i) => i + 1))
  console.log(`50 steps: peak ${peak} tokens sent, uncompacted last step ${last.original}, ${compactions.length} compactions`)
})

test('under the mycoder preset the model reads its status and compacts its own history', async () => {
  const KEEP = 4
  let call = 0
  const notes = []
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      call += 1
      const last = JSON.stringify(prompt[prompt.length - 1])
      if (last.includes('STATUS UPDATE')) notes.push(call)
      // A model that reads its status calls the tool when told it is full.
      const [toolName, input] = last.includes('Token usage is high')
        ? ['compactHistory', { preserve_recent_messages: KEEP }]
        : ['goto', { url: `https://fly.example/results?page=${call}` }]
      return {
        content: [{ type: 'tool-call', toolCallId: `call_${call}`, toolName, input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      }
    },
  })
  const config = { agent: { status_every: 3, hint_at: 0.3 }, models: { 'fake-model': { context_window: 30000, max_output: 2000 } } }
  // Nothing compacts by itself, even past this trigger: the agent decides.
  const inner = abridge.abridgePrepareStep({ preset: 'mycoder', model: 'fake-model', triggerTokens: 8000, config })
  const tools = {
    goto: tool({ description: 'Open a URL', inputSchema: z.object({ url: z.string() }), execute: async ({ url }) => snapshot(url.split('=').pop()) }),
    ...inner.tools(),
  }
  assert.deepEqual(Object.keys(tools).sort(), ['abridge_recall', 'compactHistory', 'goto'])
  const sent = []
  const prepareStep = async (step) => {
    const out = await inner(step)
    const messages = out ? out.messages : step.messages
    modelMessageSchema.array().parse(messages)
    assert.deepEqual(abridge.validate(messages, { format: 'ai-sdk' }), [], `step ${sent.length}: pairing`)
    sent.push(abridge.countTokens(messages))
    return out
  }
  const messages = [{ role: 'user', content: 'Find the cheapest flight from Zurich to Lisbon in the first week of December 2026.' }]
  const result = await generateText({ model, messages, tools, prepareStep, stopWhen: stepCountIs(24) })

  assert.deepEqual(notes, Array.from({ length: 8 }, (_, i) => 3 * (i + 1)), 'a note every third step')
  const answers = result.steps.flatMap((s) => s.toolResults).filter((r) => r.toolName === 'compactHistory')
  assert.ok(answers.length >= 1, 'the model compacted')
  for (const a of answers) assert.match(String(a.output), /^History compacted: \d+ → \d+ tokens/)
  // The step after each call is smaller than the step that called it.
  const calls = result.steps.map((s, i) => (s.toolCalls.some((c) => c.toolName === 'compactHistory') ? i : -1)).filter((i) => i >= 0)
  for (const i of calls.filter((i) => i + 1 < sent.length)) {
    assert.ok(sent[i + 1] < sent[i] * 0.75, `step ${i + 1} (${sent[i + 1]}) after the call at ${i} (${sent[i]})`)
  }
  // Before the first call nothing was compacted: the history only grew.
  const first = sent.slice(0, calls[0] + 1)
  assert.ok(first.every((t, i) => i === 0 || t > first[i - 1]), `${first}`)
  assert.ok(first[first.length - 1] > 8000, 'past the trigger, uncompacted')
  console.log(`mycoder: steps ${sent.join(' ')}; compacted at ${calls}`)
  assert.equal(inner.stats.compactions, answers.filter((a) => String(a.output).startsWith('History compacted')).length)
})
