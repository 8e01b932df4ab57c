// The dashboard in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against `abridge ui` (and one with a token) started here
// over a store filled by `abridge compact`. Screenshots of each page go to
// target/ui-screenshots/.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync } from 'node:child_process'
import { createInterface } from 'node:readline'
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
const target = process.env.CARGO_TARGET_DIR ?? path.join(root, 'target')
const abridge = path.join(target, 'debug', 'abridge')
const shots = path.join(target, 'ui-screenshots')
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync']

const procs = []
let dir, store, browser, open, guarded, proxy, direct, upstream

/** Starts a program; resolves to the first http:// address it prints (on the line matching `want`). */
function started(cmd, args, want = /http:\/\//) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ABRIDGE_UI_TOKEN: '' } })
  procs.push(p)
  return new Promise((resolve, reject) => {
    p.on('error', reject)
    const lines = createInterface({ input: p.stdout })
    lines.on('line', (line) => {
      if (want.test(line)) resolve(new URL(line.split(/\s+/).find((w) => w.startsWith('http://')).replace(/[);]+$/, '')).origin)
    })
  })
}

/** A proxy session: 30 requests of a growing tool loop through `abridge serve`. */
async function proxySession() {
  const fake = await started(path.join(target, 'debug', 'abridge-fake-provider'), ['--listen', '127.0.0.1:0'])
  const base = await started(abridge, ['serve', '--listen', '127.0.0.1:0', '--config', path.join(root, 'sdk-tests', 'harness.toml'),
    '--openai-upstream', `${fake}/v1`, '--anthropic-upstream', fake, '--store', path.join(dir, 'proxy.sqlite')], /dashboard at/)
  // The same requests straight to a provider of their own: what the client sent, as a provider counts it.
  direct = await started(path.join(target, 'debug', 'abridge-fake-provider'), ['--listen', '127.0.0.1:0'])
  const messages = [{ role: 'system', content: 'You are a web agent.' }, { role: 'user', content: 'Compare the fares on every page.' }]
  for (let i = 0; i < 30; i++) {
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'read_page', arguments: `{"page": ${i}}` } }] })
    messages.push({ role: 'tool', tool_call_id: `call_${i}`, content: `<EXTERNAL-CONTENT>page ${i}\n${'- row "Fare" CHF 180 [ref=e1]\n'.repeat(60)}</EXTERNAL-CONTENT>` })
    for (const url of [`${base}/v1/chat/completions`, `${direct}/v1/chat/completions`]) {
      const r = await fetch(url, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer test-key' },
        body: JSON.stringify({ model: 'gpt-4o', messages }),
      })
      assert.equal(r.status, 200, await r.text())
    }
  }
  upstream = fake
  return base
}

/** The prompt tokens a fake provider logged, summed. */
async function logged(provider) {
  const report = await (await fetch(`${provider}/_report`)).json()
  return report.requests.reduce((sum, r) => sum + r.tokens, 0)
}

/** Starts `abridge ui`; resolves to its base URL. */
function ui(env = {}) {
  const p = spawn(abridge, ['ui', '--store', store, '--listen', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ABRIDGE_UI_TOKEN: '', ...env },
  })
  procs.push(p)
  return new Promise((resolve, reject) => {
    p.on('error', reject)
    createInterface({ input: p.stdout }).once('line', (line) => resolve(new URL(line.split(' ').pop()).origin))
  })
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'abridge-ui-'))
  store = path.join(dir, 'store.sqlite')
  const compact = (file, ...args) => execFileSync(abridge, ['compact', file, '--store', store, ...args], { cwd: root, stdio: ['ignore', 'ignore', 'ignore'] })
  compact('examples/web-agent.anthropic.json', '--target-tokens', '2500', '--keep-last', '1')
  compact('examples/web-agent.anthropic.json', '--target-tokens', '2200', '--keep-last', '1')
  compact('examples/coding-agent.openai.json', '--target-tokens', '700', '--keep-last', '2')
  mkdirSync(shots, { recursive: true })
  ;[open, guarded, proxy] = await Promise.all([ui(), ui({ ABRIDGE_UI_TOKEN: 'browser-token' }), proxySession()])
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS })
})

after(async () => {
  await browser?.close()
  // Each server finishes its in-flight work (and its store's last writes) before the directory goes.
  await Promise.all(procs.map((p) => new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve()
    p.once('exit', resolve)
    p.kill('SIGTERM')
  })))
  rmSync(dir, { recursive: true, force: true })
})

/** A page that records every request it makes. */
async function page() {
  const p = await browser.newPage({ viewport: { width: 1400, height: 900 } })
  p.requests = []
  p.on('request', (r) => p.requests.push(r.url()))
  return p
}

function sameOrigin(p, origin) {
  const foreign = p.requests.filter((u) => new URL(u).origin !== origin)
  assert.deepEqual(foreign, [], 'no request to another origin')
}

test('the sessions page lists the compacted sessions', async () => {
  const p = await page()
  const r = await p.goto(`${open}/ui`)
  assert.equal(r.status(), 200)
  const rows = p.locator('#sessions tbody tr')
  assert.equal(await rows.count(), 2)
  const web = rows.filter({ hasText: 'web-agent.anthropic.json' })
  assert.equal(await web.locator('.badge.compacted').count(), 1)
  assert.equal((await web.locator('td').nth(4).textContent()).trim(), '2', 'two compactions')
  assert.equal((await web.locator('td').nth(2).textContent()).trim(), '—', 'no request log for a CLI conversation')
  assert.ok(await web.locator('.bar').isVisible(), 'the context bar against the window')
  await p.fill('input[name=q]', 'coding')
  await p.click('button[type=submit]')
  assert.equal(await p.locator('#sessions tbody tr').count(), 1)
  await p.goto(`${open}/ui`)
  await p.screenshot({ path: path.join(shots, 'sessions.png'), fullPage: true })
  sameOrigin(p, open)
  await p.close()
})

test('the session chart has one marker per compaction', async () => {
  const p = await page()
  await p.goto(`${open}/ui`)
  await p.click('text=web-agent.anthropic.json')
  await p.waitForSelector('svg#timeline')
  assert.equal(await p.locator('svg#timeline circle.marker').count(), 2)
  assert.ok(await p.locator('svg#timeline line.target').count() >= 1, 'the target line')
  const box = await p.locator('svg#timeline').boundingBox()
  assert.ok(box.width > 400 && box.height > 150, 'the chart renders at size')
  await p.screenshot({ path: path.join(shots, 'session.png'), fullPage: true })
  sameOrigin(p, open)
  await p.close()
})

test('the compaction page shows the briefing and the diff', async () => {
  const p = await page()
  await p.goto(`${open}/ui?q=coding`)
  await p.locator('#sessions tbody tr td').nth(4).locator('a').click()   // its last compaction
  await p.waitForSelector('#briefing')
  assert.ok((await p.locator('#briefing').textContent()).length > 50, 'a briefing')
  assert.ok(await p.locator('#before li.dropped').count() > 0, 'changed messages highlighted')
  assert.ok(await p.locator('#after li.added').count() > 0)
  const first = p.locator('#before li.dropped details').first()
  assert.equal(await first.locator('pre').isVisible(), false)
  await first.locator('summary').click()
  assert.ok(await first.locator('pre').isVisible(), 'expandable')
  const download = await Promise.all([p.waitForEvent('download'), p.click('#download')])
  assert.match(download[0].suggestedFilename(), /original\.json$/)
  await p.screenshot({ path: path.join(shots, 'compaction.png'), fullPage: true })
  sameOrigin(p, open)
  await p.close()
})

test("a proxy session's chart shows each request, the provider's usage and its compactions", async () => {
  const p = await page()
  // The request log is written when each response ends: wait for the last row.
  for (let i = 0; i < 50; i++) {
    await p.goto(`${proxy}/ui`)
    if ((await p.locator('#sessions tbody tr td').nth(2).textContent()).trim() === '30') break
    await p.waitForTimeout(100)
  }
  const row = p.locator('#sessions tbody tr').first()
  assert.equal((await row.locator('td').nth(2).textContent()).trim(), '30', 'thirty requests')
  assert.equal(await row.locator('.badge.compacted').count(), 1, 'its last request went compacted')
  await row.locator('td a').first().click()
  await p.waitForSelector('svg#timeline')
  assert.equal((await p.locator('#requests').textContent()).trim(), '30')
  const points = (await p.locator('#abridge-line').getAttribute('points')).trim().split(' ')
  assert.equal(points.length, 30, 'one point per request')
  assert.equal((await p.locator('#usage-line').getAttribute('points')).trim().split(' ').length, 30, 'the provider reported every one')
  const markers = await p.locator('svg#timeline circle.marker').count()
  assert.ok(markers > 0)
  assert.equal(markers, await p.locator('#compactions tbody tr').count(), 'one marker per compaction')
  assert.ok(await p.locator('svg#timeline line.trigger').count() === 1 && await p.locator('svg#timeline line.target').count() === 1)
  await p.screenshot({ path: path.join(shots, 'proxy-session.png'), fullPage: true })
  sameOrigin(p, proxy)
  await p.close()
})

test('the savings page adds up to what the providers logged', async () => {
  const p = await page()
  const number = async (sel) => Number((await p.locator(sel).textContent()).replace(/[^0-9]/g, ''))
  for (let i = 0; i < 50; i++) {
    await p.goto(`${proxy}/ui/savings`)
    if (await p.locator('#total-requests').count() && await number('#total-requests') === 30) break
    await p.waitForTimeout(100)
  }
  assert.equal(await number('#total-requests'), 30)
  const [client, forwarded] = [await logged(direct), await logged(upstream)]
  assert.ok(forwarded < client, `${forwarded} forwarded of ${client}`)
  assert.equal(await number('#total-client'), client, 'tokens the client sent, as its own provider logged them')
  assert.equal(await number('#total-forwarded'), forwarded, 'tokens forwarded, as the upstream logged them')
  assert.equal(await p.locator('#per-tenant tbody tr').count(), 1)
  assert.equal((await p.locator('#per-model tbody tr td').first().textContent()).trim(), 'gpt-4o')
  const points = (await p.locator('#forwarded-line').getAttribute('points')).trim().split(' ')
  assert.equal(points.length, 1, 'one day')
  const box = await p.locator('svg#savings-chart').boundingBox()
  assert.ok(box.width > 400 && box.height > 150, 'the chart renders at size')
  await p.screenshot({ path: path.join(shots, 'savings.png'), fullPage: true })
  sameOrigin(p, proxy)
  await p.close()
})

test('a dashboard with a token refuses pages without it', async () => {
  const p = await page()
  assert.equal((await p.goto(`${guarded}/ui`)).status(), 401)
  assert.equal((await p.goto(`${guarded}/ui/compactions/1`)).status(), 401)
  assert.equal((await p.goto(`${guarded}/ui?token=browser-token`)).status(), 200)
  assert.equal((await p.goto(`${guarded}/ui/compactions/1`)).status(), 200, 'the cookie carries the token')
  await p.close()
})
