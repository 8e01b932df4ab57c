// The recall tool in an AI SDK loop: after abridgePrepareStep compacts, the
// model reads a handle in its history, calls abridge_recall with it (the
// tool prepareStep.tools() gives the agent) and gets the page back whole.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { generateText, tool, stepCountIs } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { z } from 'zod'

const require = createRequire(import.meta.url)
const abridge = require('..')

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } }

function page(n) {
  const rows = Array.from({ length: 90 }, (_, k) => `- row "Flight LX${n}${k} CHF ${180 + k}" [ref=e${n}_${k}]`)
  return `<EXTERNAL-CONTENT>\nPage ${n}\n${rows.join('\n')}\n</EXTERNAL-CONTENT>`
}

test('a model recalls a clipped page by its handle and gets it back whole', async () => {
  const recalled = new Map()
  let call = 0
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      call += 1
      const text = JSON.stringify(prompt)
      for (const m of prompt) {
        for (const p of Array.isArray(m.content) ? m.content : []) {
          if (p.type === 'tool-result' && p.toolName === 'abridge_recall') recalled.set(p.toolCallId, p.output.value)
        }
      }
      const handle = text.match(/abr_[0-9a-z]{10}/)
      const last = prompt[prompt.length - 1]
      const justRecalled = Array.isArray(last.content) && last.content.some((p) => p.toolName === 'abridge_recall')
      if (handle && !justRecalled && recalled.size === 0) {
        return {
          content: [{ type: 'tool-call', toolCallId: `r_${call}`, toolName: 'abridge_recall', input: JSON.stringify({ handle: handle[0] }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
        }
      }
      return {
        content: [{ type: 'tool-call', toolCallId: `c_${call}`, toolName: 'goto', input: JSON.stringify({ n: call }) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      }
    },
  })
  const prepareStep = abridge.abridgePrepareStep({ triggerTokens: 8_000, targetTokens: 5_000 })
  const tools = {
    goto: tool({ description: 'Open a page', inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => page(n) }),
    ...prepareStep.tools(),
  }
  assert.ok(tools.abridge_recall, 'the recall tool is given to the agent')
  const messages = [{ role: 'user', content: 'Find the cheapest flight.' }]
  await generateText({ model, messages, tools, prepareStep, stopWhen: stepCountIs(24) })
  assert.ok(prepareStep.stats.compactions > 0, 'compacted')
  assert.equal(recalled.size, 1, 'the model recalled once and read the answer')
  const answer = [...recalled.values()][0]
  assert.match(answer, /^\[abr_[0-9a-z]{10} · /)
  const whole = Array.from({ length: 24 }, (_, n) => page(n)).find((p) => answer.includes(p.split('\n').slice(2, -1).join('\n')))
  assert.ok(whole, `the answer holds a whole page: ${answer.slice(0, 200)}`)
})

test('Session.recall is a plain function over what the session replaced', () => {
  const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'task' }] }
  const tools = [{ type: 'function', function: { name: 'goto', parameters: { type: 'object' } } }]
  const s = new abridge.Session({ ...body, tools }, { triggerTokens: 3_000, targetTokens: 2_000 })
  for (let n = 0; n < 8; n++) {
    s.push([
      { role: 'assistant', content: null, tool_calls: [{ id: `c${n}`, type: 'function', function: { name: 'goto', arguments: `{"n":${n}}` } }] },
      { role: 'tool', tool_call_id: `c${n}`, content: page(n) },
    ])
    s.turn()
  }
  const handle = JSON.stringify(s.messages).match(/abr_[0-9a-z]{10}/)
  assert.ok(handle, 'the compacted history names a handle')
  assert.ok(s.recall(handle[0]).includes('Flight LX'))
  // A name seen only inside a clipped page is found without its handle.
  const found = s.recall({ query: 'LX145' })
  assert.ok(found.includes('search for "LX145"') && found.includes('Flight LX145 CHF 225'), found)
  assert.match(found, /abr_[0-9a-z]{10} · /)
  assert.ok(s.recall({ query: 'LX9999' }).includes('no original'))
  assert.equal(s.recallTool().name, 'abridge_recall')
  const bad = s.recallAnswer('not json')
  assert.ok(bad.isError && bad.text.includes('takes'))
  assert.ok(s.recallAnswer({ handle: 'abr_zzzzzzzzzz' }).isError)
})
