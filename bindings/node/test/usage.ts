// Compiled by `tsc -p test` (no emit): the declarations in index.d.ts
// describe the calls the README shows, and reject wrong ones.
import { generateText, stepCountIs, type ModelMessage } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import {
  abridgePrepareStep,
  CannotShrinkError,
  compact,
  compactAsync,
  compactModelMessages,
  convert,
  countTokens,
  Session,
  validate,
  type Report,
} from '..'

const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }
const { body: out, report } = compact(body, { targetTokens: 1000, tokenizer: 'o200k_base' })
const model: string = out.model
const saved: number = report.tokens_before - report.tokens_after
const history: ModelMessage[] = [{ role: 'user', content: 'Book a flight.' }]
const { messages } = compactModelMessages(history, { targetTokens: 500, config: { budget: { min_iterations: 2 } } })
const again: ModelMessage[] = messages
const n: number = countTokens(again, { format: 'ai-sdk' }) + validate(body).length + convert('[]', { to: 'openai' }).length
const session = new Session<ModelMessage>(history, { format: 'ai-sdk', triggerTokens: 50_000 })
session.onEvent((e) => e.event)
session.push({ role: 'user', content: 'Go on.' })
const turn = session.turn({ usage: 1200 })
const r: Report | null = turn.report
const prepareStep = abridgePrepareStep<ModelMessage>({ triggerTokens: 60_000, onCompact: (rep: Report) => rep.tokens_after })
void generateText({ model: new MockLanguageModelV3(), messages: history, prepareStep, stopWhen: stepCountIs(5) })
void compactAsync(body).catch((e: unknown) => e instanceof CannotShrinkError)
const sessions: number = prepareStep.stats.sessions
// @ts-expect-error an unknown tokenizer is rejected
compact(body, { tokenizer: 'gpt2' })
// @ts-expect-error `to` is required
convert('[]', {})
export { model, saved, n, r, sessions }
