// The package's API on bodies of both families, AI SDK messages, sessions
// and errors, and every corpus conversation as AI SDK messages.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const abridge = require('..')

function openaiBody(n) {
  const messages = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Fix the failing test in src/date.rs.' }]
  for (let i = 0; i < n; i++) {
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/f${i}.rs"}` } }] })
    messages.push({ role: 'tool', tool_call_id: `c${i}`, content: `fn f${i}() {}\n`.repeat(120) })
  }
  return { model: 'gpt-4o', messages, temperature: 0.2 }
}

test('compact returns the body in the shape given, at or under the target', () => {
  const body = openaiBody(30)
  const before = abridge.countTokens(body)
  const { body: out, report } = abridge.compact(body, { targetTokens: 4000 })
  assert.ok(before > 12000, `${before}`)
  assert.ok(report.compacted && report.tokens_after <= 4000)
  assert.equal(out.model, 'gpt-4o')
  assert.equal(out.temperature, 0.2)
  assert.equal(out.messages.length, body.messages.length)
  assert.deepEqual(out.messages.at(-1), body.messages.at(-1))
  assert.deepEqual(abridge.validate(out), [])
  assert.equal(abridge.countTokens(out), report.tokens_after)
  const list = abridge.compact(body.messages, { targetTokens: 4000 }).body
  assert.ok(Array.isArray(list))
})

test('Anthropic bodies keep their top-level system', () => {
  const messages = [{ role: 'user', content: 'Build it.' }]
  for (let i = 0; i < 20; i++) {
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: `u${i}`, name: 'sh', input: { cmd: 'make' } }] })
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `u${i}`, content: 'warning: unused\n'.repeat(100) }] })
  }
  const { body, report } = abridge.compact({ model: 'claude-sonnet-4-5', max_tokens: 512, system: 'Be brief.', messages }, { targetTokens: 2500 })
  assert.equal(body.system, 'Be brief.')
  assert.ok(report.tokens_after <= 2500)
  assert.deepEqual(abridge.validate(body), [])
})

test('Gemini bodies and contents come back in their shape, signatures on their calls', () => {
  const contents = [{ role: 'user', parts: [{ text: 'Fix src/date.rs.' }] }]
  for (let i = 0; i < 30; i++) {
    contents.push({ role: 'model', parts: [{ functionCall: { name: 'read_file', args: { path: `src/f${i}.rs` } }, thoughtSignature: `c2ln${String(i).padStart(4, '0')}` }] })
    contents.push({ role: 'user', parts: [{ functionResponse: { name: 'read_file', response: { output: `fn f${i}() {}\n`.repeat(120) } } }] })
  }
  const body = { contents, systemInstruction: { parts: [{ text: 'Be brief.' }] }, generationConfig: { temperature: 0.2 } }
  assert.ok(abridge.countTokens(body) > 12000)
  const { body: out, report } = abridge.compact(body, { targetTokens: 4000 })
  assert.ok(report.compacted && report.tokens_after <= 4000, `${report.tokens_after}`)
  assert.deepEqual(out.systemInstruction, body.systemInstruction)
  assert.deepEqual(out.generationConfig, body.generationConfig)
  assert.deepEqual(out.contents.slice(-2), contents.slice(-2))
  assert.deepEqual(abridge.validate(out), [])
  for (const p of out.contents.flatMap((t) => t.parts).filter((p) => p.thoughtSignature)) {
    assert.equal(p.functionCall.args.path, `src/f${Number(p.thoughtSignature.slice(4))}.rs`)
  }
  const list = abridge.compact(contents, { targetTokens: 4000 }).body
  assert.ok(Array.isArray(list))
  assert.deepEqual(abridge.validate(list, { format: 'gemini' }), [])

  const s = new abridge.Session(null, { format: 'gemini', triggerTokens: 5000, targetTokens: 3000 })
  s.push(contents[0])
  for (let i = 1; i < contents.length; i += 2) {
    s.push(contents.slice(i, i + 2))
    assert.ok(s.turn().tokens <= 5000)
  }
  assert.deepEqual(abridge.validate(s.messages, { format: 'gemini' }), [])
  assert.equal(s.tokens, abridge.countTokens(s.messages, { format: 'gemini' }))
})

test('Responses bodies and item lists come back in their shape, reasoning untouched', () => {
  const items = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix src/date.rs.' }] }]
  for (let i = 0; i < 30; i++) {
    items.push({ type: 'reasoning', id: `rs_${i}`, summary: [], encrypted_content: `gAAAA${i}` })
    items.push({ type: 'function_call', call_id: `c${i}`, name: 'exec_command', arguments: `{"cmd":"cat src/f${i}.rs"}` })
    items.push({ type: 'function_call_output', call_id: `c${i}`, output: `fn f${i}() {}\n`.repeat(120) })
  }
  const body = { model: 'gpt-5', instructions: 'You are a coding agent.', input: items, store: false }
  assert.ok(abridge.countTokens(body) > 12000)
  const { body: out, report } = abridge.compact(body, { targetTokens: 4000 })
  assert.ok(report.compacted && report.tokens_after <= 4000, `${report.tokens_after}`)
  assert.equal(out.instructions, body.instructions)
  assert.deepEqual(out.input.slice(-3), items.slice(-3))
  assert.deepEqual(abridge.validate(out), [])
  for (const r of out.input.filter((i) => i.type === 'reasoning')) {
    assert.ok(items.some((i) => JSON.stringify(i) === JSON.stringify(r)), 'reasoning items are never edited')
  }
  const asList = abridge.compact(items, { targetTokens: 4000 })
  assert.ok(Array.isArray(asList.body) && asList.report.tokens_after <= 4000)
  assert.equal(abridge.countTokens(asList.body), asList.report.tokens_after)
})

test('a Session compacts as it grows and reports its events', () => {
  const events = []
  const s = new abridge.Session(null, { triggerTokens: 3000, targetTokens: 2000 }).onEvent((e) => events.push(e.event))
  s.push({ role: 'user', content: 'Watch the logs.' })
  let compacted = 0
  for (let i = 0; i < 40; i++) {
    assert.ok(s.push([
      { role: 'assistant', content: null, tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'tail', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: `c${i}`, content: `line ${i}\n`.repeat(60) },
    ]) > 0)
    const t = s.turn()
    compacted += t.compacted ? 1 : 0
    assert.ok(t.tokens <= 3000, `${t.tokens}`)
    assert.deepEqual(abridge.validate(s.messages), [])
  }
  assert.ok(compacted > 0)
  assert.ok(events.includes('history_compacted'), events.join(','))
  assert.equal(s.tokens, abridge.countTokens(s.messages))
})

test('a preset gives a seed system\'s behaviour (Pilo #437: every old result clipped, the last three whole)', () => {
  for (const [preset, clips] of [['pilo-clipping', true], [undefined, false]]) {
    const s = new abridge.Session(null, { preset, model: 'gpt-4o' })
    s.push({ role: 'user', content: 'Click through the form.' })
    const results = []
    for (let i = 0; i < 10; i++) {
      const result = `clicked #button-${i}: the page now shows step ${i + 1}`
      results.push(result)
      s.push([
        { role: 'assistant', content: null, tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'click', arguments: `{"ref":"b${i}"}` } }] },
        { role: 'tool', tool_call_id: `c${i}`, content: result },
      ])
      s.turn()
    }
    const sent = s.messages.filter((m) => m.role === 'tool').map((m) => m.content)
    assert.deepEqual(sent.slice(-3), results.slice(-3), String(preset))
    assert.equal(JSON.stringify(sent.slice(0, 7)) !== JSON.stringify(results.slice(0, 7)), clips, String(preset))
    assert.deepEqual(abridge.validate(s.messages), [])
  }
  assert.throws(() => abridge.compact(openaiBody(2), { preset: 'pilo' }), (e) => e instanceof abridge.ConfigError && /pilo-clipping/.test(e.message))
})

test('errors are typed and name what and where', async () => {
  assert.throws(() => abridge.compact({ model: 'x' }), (e) => e instanceof abridge.InputError && /messages/.test(e.message))
  assert.throws(() => abridge.compactModelMessages([{ role: 'tool', content: [{ type: 'tool-result', output: {} }] }]),
    (e) => e instanceof abridge.InputError && /\[0\]/.test(e.message))
  assert.throws(() => abridge.compact(openaiBody(2), { targetTokens: 0 }), abridge.ConfigError)
  assert.throws(() => abridge.compact(openaiBody(2), { config: { trigger: { nope: 1 } } }), (e) => e instanceof abridge.ConfigError && /nope/.test(e.message))
  assert.throws(() => abridge.compact(openaiBody(3), { targetTokens: 10 }), (e) => e instanceof abridge.CannotShrinkError && e.code === 'CannotShrinkError')
  await assert.rejects(abridge.compactAsync(openaiBody(3), { targetTokens: 10 }), abridge.CannotShrinkError)
  const ok = await abridge.compactAsync(openaiBody(30), { targetTokens: 4000 })
  assert.ok(ok.report.tokens_after <= 4000)
})

test('every corpus conversation, as AI SDK messages, compacts to valid messages under the target', async (t) => {
  const corpus = path.join(__dirname, '../../../../shared/corpus')
  if (!fs.existsSync(corpus)) return t.skip(`corpus not found at ${corpus}`)
  const { modelMessageSchema } = await import('ai')
  const schema = modelMessageSchema.array()
  let n = 0
  let compacted = 0
  for (const dir of fs.readdirSync(corpus).sort()) {
    const sub = path.join(corpus, dir)
    if (!fs.statSync(sub).isDirectory()) continue
    for (const file of fs.readdirSync(sub).filter((f) => /\.jsonl?$/.test(f)).sort()) {
      const convs = abridge.convert(fs.readFileSync(path.join(sub, file), 'utf8'), { to: 'ai-sdk' })
      for (const [i, messages] of convs.entries()) {
        const at = `${dir}/${file}#${i}`
        schema.parse(messages)
        const tokens = abridge.countTokens(messages, { format: 'ai-sdk' })
        let target = Math.floor(tokens * 0.3)
        let out
        try {
          out = abridge.compactModelMessages(messages, { targetTokens: target })
        } catch (e) {
          // The floor (system prompt, task, last iteration) is over 30%: ask for the floor.
          assert.ok(e instanceof abridge.CannotShrinkError, `${at}: ${e}`)
          target = Number(/cannot shrink below (\d+)/.exec(e.message)[1])
          out = abridge.compactModelMessages(messages, { targetTokens: target })
        }
        assert.ok(out.report.tokens_after <= target, `${at}: ${out.report.tokens_after} > ${target}`)
        const result = schema.safeParse(out.messages)
        assert.ok(result.success, `${at}: ${result.error}`)
        // A log may end on a call still waiting for its result (mini-swe-agent's
        // submit, a Claude Code checkpoint taken mid-step); compacting adds no violation.
        const pending = abridge.validate(messages, { format: 'ai-sdk' }).length
        assert.ok(pending <= 1, `${at}: ${pending} violations before compacting`)
        assert.equal(abridge.validate(out.messages, { format: 'ai-sdk' }).length, pending, `${at}: pairing`)
        compacted += out.report.compacted ? 1 : 0
        n += 1
      }
    }
  }
  assert.ok(n > 200, `${n} conversations`)
  console.log(`${n} corpus conversations as AI SDK messages: ${compacted} compacted, all valid and under target`)
})
