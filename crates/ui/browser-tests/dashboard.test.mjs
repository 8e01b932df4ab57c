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
let dir, store, browser, open, guarded

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
  ;[open, guarded] = await Promise.all([ui(), ui({ ABRIDGE_UI_TOKEN: 'browser-token' })])
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS })
})

after(async () => {
  await browser?.close()
  procs.forEach((p) => p.kill('SIGTERM'))
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
  assert.equal((await web.locator('td').nth(2).textContent()).trim(), '2', 'two compactions')
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
  await p.locator('#sessions tbody tr td').last().locator('a').click()
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

test('a dashboard with a token refuses pages without it', async () => {
  const p = await page()
  assert.equal((await p.goto(`${guarded}/ui`)).status(), 401)
  assert.equal((await p.goto(`${guarded}/ui/compactions/1`)).status(), 401)
  assert.equal((await p.goto(`${guarded}/ui?token=browser-token`)).status(), 200)
  assert.equal((await p.goto(`${guarded}/ui/compactions/1`)).status(), 200, 'the cookie carries the token')
  await p.close()
})
