// Every JS sample in the README and the book, run as written, each in its
// own Node process: a CommonJS sample from the repository's root (where its
// `require('./bindings/node')` points), an ES module one beside this file
// (where `ai` and `@ai-sdk/openai` are installed), with what its prose takes
// as given declared before it. The AI SDK's model goes to the fake provider
// (OPENAI_BASE_URL), never outside the machine.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const bin = path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, "target"), "debug");
const PAGES = ["README.md", "docs/src/packages.md"];
let provider, upstream, dir;

/** [page, line, code] of every ```js block of PAGES. */
function samples() {
  const out = [];
  for (const page of PAGES) {
    const text = readFileSync(path.join(root, page), "utf8");
    for (const m of text.matchAll(/^```js\n([\s\S]*?)^```/gm)) {
      out.push([page, text.slice(0, m.index).split("\n").length, m[1]]);
    }
  }
  return out;
}

/** What the samples' prose takes as given. */
const GIVEN = `
const requestBody = JSON.parse(require('fs').readFileSync(${JSON.stringify(path.join(root, "examples", "coding-agent.openai.json"))}, 'utf8'))
const modelMessages = [{ role: 'user', content: 'Fix the failing test in src/lib.rs.' }, { role: 'assistant', content: 'The test passes now.' }]
const newMessages = [{ role: 'user', content: 'Go on with the next file.' }]
const sent = []
const send = (m) => sent.push(m)
const systemPrompt = 'You are a web agent.'
const task = 'Find the cheapest fare.'
const webActions = {}
const validateAnswer = async () => null
`;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "abridge-docs-"));
  // What the CommonJS sample's files name, in the folder it runs in.
  writeFileSync(path.join(dir, "abridge.toml"), "[budget]\ntarget_tokens = 1500\n");
  writeFileSync(path.join(dir, "session.jsonl"), [
    { type: "user", uuid: "u1", sessionId: "s1", message: { role: "user", content: "Fix the failing test in src/lib.rs." } },
    { type: "assistant", uuid: "a1", parentUuid: "u1", sessionId: "s1", message: { id: "msg_1", role: "assistant", content: [{ type: "text", text: "The test passes now." }] } },
  ].map((l) => JSON.stringify(l)).join("\n") + "\n");
  // The ES module sample imports the package by its name, as a user's would.
  const linked = path.join(here, "node_modules", "abridge");
  if (!existsSync(linked)) symlinkSync(path.join(root, "bindings", "node"), linked, "dir");
  provider = spawn(path.join(bin, "abridge-fake-provider"), ["--listen", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "ignore"] });
  upstream = await new Promise((resolve, reject) => {
    provider.on("error", reject);
    createInterface({ input: provider.stdout }).once("line", (line) => {
      resolve(line.split(/\s+/).find((w) => w.startsWith("http://")).replace(/[);]+$/, ""));
    });
  });
});

after(async () => {
  await new Promise((resolve) => {
    if (provider.exitCode !== null || provider.signalCode !== null) return resolve();
    provider.once("exit", resolve);
    provider.kill("SIGTERM");
  });
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `file` with node in `cwd`; its stdout. */
function node(file, cwd) {
  return execFileSync(process.execPath, [file], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, OPENAI_BASE_URL: `${upstream}/v1`, OPENAI_API_KEY: "sk-docs-test" },
  });
}

test("every JS sample in the docs runs", () => {
  const found = samples();
  assert.ok(found.length >= 3, `the pages hold fewer samples than they did: ${found.length}`);
  for (const [page, line, code] of found) {
    const where = `${page}:${line}`;
    const module = /^import /m.test(code);
    // A line after the sample says what it left: the session sent, the loop's messages.
    const check = module
      ? "\nconsole.log(JSON.stringify({ messages: messages.length }))\n"
      : "\nconsole.log(JSON.stringify({ sent: typeof sent === 'undefined' ? 0 : sent.length, report: typeof report === 'undefined' ? null : report.tokensAfter ?? report.tokens_after ?? null }))\n";
    let out;
    if (module) {
      const file = path.join(here, `.sample-${process.pid}-${line}.mjs`);
      writeFileSync(file, GIVEN.replace(/require\('fs'\)/, "(await import('node:fs'))") + code + check);
      try {
        out = node(file, here);
      } finally {
        rmSync(file, { force: true });
      }
    } else {
      // CommonJS with top-level await: the sample runs in an async function.
      const file = path.join(root, `.sample-${process.pid}-${line}.cjs`);
      writeFileSync(file, `const fs = require('fs')\nprocess.chdir(${JSON.stringify(dir)})\n;(async () => {\n${GIVEN}${code}${check}})().catch((e) => { console.error(e); process.exit(1) })\n`);
      try {
        out = node(file, root);
      } finally {
        rmSync(file, { force: true });
      }
    }
    const last = JSON.parse(out.trim().split("\n").pop());
    if (module) {
      assert.ok(last.messages > 2, `${where}: the loop's messages grew: ${out}`);
    } else if (code.includes("session.turn")) {
      assert.equal(last.sent, 1, `${where}: the session's messages were sent: ${out}`);
    } else {
      assert.ok(last.report !== null, `${where}: a report: ${out}`);
    }
  }
});
