// The AI SDK (`ai` with @ai-sdk/openai and @ai-sdk/anthropic) runs tool
// loops through `abridge serve`, streaming and not, against the fake
// provider, which checks every request it receives.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { generateText, streamText, tool, stepCountIs } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { z } from "zod";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, "target"), "debug");
const LIMIT = 6000;
const procs = [];
let upstream;
let proxy;
let dir;

/** Starts a process that prints its base URL on its first line. */
function start(cmd, args) {
  const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "ignore"] });
  procs.push(p);
  return new Promise((resolve, reject) => {
    p.on("error", reject);
    createInterface({ input: p.stdout }).once("line", (line) => {
      resolve(line.split(/\s+/).find((w) => w.startsWith("http://")).replace(/[);]+$/, ""));
    });
  });
}

before(async () => {
  upstream = await start(path.join(bin, "abridge-fake-provider"), ["--max-tokens", String(LIMIT)]);
  dir = mkdtempSync(path.join(tmpdir(), "abridge-node-"));
  const store = path.join(dir, "store.sqlite");
  proxy = await start(path.join(bin, "abridge"), [
    "serve", "--listen", "127.0.0.1:0", "--config", path.join(root, "sdk-tests", "harness.toml"),
    "--openai-upstream", `${upstream}/v1`, "--anthropic-upstream", upstream, "--store", store,
  ]);
});

after(async () => {
  // Each server finishes its store's last writes before the directory goes.
  await Promise.all(procs.map((p) => new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve();
    p.once("exit", resolve);
    p.kill("SIGTERM");
  })));
  rmSync(dir, { recursive: true, force: true });
});

const fileContent = (turn) =>
  Array.from({ length: 30 }, (_, k) => `export const step_${turn}_${k} = (x) => x * ${k} + ${turn}; // line ${k}\n`).join("");

function tools() {
  let turn = 0;
  return {
    read_file: tool({
      description: "Read a file",
      inputSchema: z.object({ path: z.string() }),
      execute: async () => fileContent(turn++),
    }),
  };
}

async function report() {
  return (await (await fetch(`${upstream}/_report`)).json()).requests;
}

/** Runs `run` and checks the requests it made. */
async function checked(steps, run) {
  const before = (await report()).length;
  await run();
  const requests = (await report()).slice(before);
  assert.equal(requests.length, steps);
  requests.forEach((r, i) => {
    assert.deepEqual(r.violations, [], `request ${i}`);
    assert.ok(!r.over_limit, `request ${i}: ${r.tokens} tokens`);
  });
  const breaks = requests.filter((r) => r.prefix_kept === false).length;
  const metrics = await (await fetch(`${proxy}/metrics`)).text();
  const compactions = metrics
    .split("\n")
    .filter((l) => l.startsWith("abridge_compactions_total{"))
    .reduce((s, l) => s + Number(l.split(" ").pop()), 0);
  assert.ok(compactions > 0, "compactions show in /metrics");
  return { requests, breaks, compactions };
}

const headers = (session) => ({ "x-abridge-session": session, "x-fake-session": session });

test("AI SDK + OpenAI chat: a 60-step tool loop stays under the trigger", async () => {
  const openai = createOpenAI({ baseURL: `${proxy}/v1`, apiKey: "sk-node-test", headers: headers("node-openai") });
  const { breaks, compactions } = await checked(60, () =>
    generateText({
      model: openai.chat("fake-model"),
      system: "You are a careful coding agent.",
      prompt: "Read every module and report.",
      tools: tools(),
      stopWhen: stepCountIs(60),
    }),
  );
  assert.ok(breaks <= compactions, `${breaks} prefix changes, ${compactions} compactions`);
});

test("AI SDK + OpenAI chat, streaming", async () => {
  const openai = createOpenAI({ baseURL: `${proxy}/v1`, apiKey: "sk-node-test", headers: headers("node-openai-stream") });
  const { requests } = await checked(40, async () => {
    const result = streamText({
      model: openai.chat("fake-model"),
      prompt: "Read every module and report.",
      tools: tools(),
      stopWhen: stepCountIs(40),
    });
    await result.consumeStream();
    assert.equal((await result.steps).length, 40);
  });
  assert.ok(requests.every((r) => r.stream));
});

test("AI SDK + Anthropic, streaming and not", async () => {
  for (const stream of [false, true]) {
    const anthropic = createAnthropic({ baseURL: `${proxy}/v1`, apiKey: "sk-ant-node-test", headers: headers(`node-anthropic-${stream}`) });
    const options = {
      model: anthropic("fake-model"),
      maxOutputTokens: 1024,
      system: "You are a careful coding agent.",
      prompt: "Read every module and report.",
      tools: tools(),
      stopWhen: stepCountIs(40),
    };
    await checked(40, async () => {
      if (stream) {
        const result = streamText(options);
        await result.consumeStream();
        assert.equal((await result.steps).length, 40);
      } else {
        const result = await generateText(options);
        assert.equal(result.steps.length, 40);
      }
    });
  }
});
