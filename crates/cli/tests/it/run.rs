//! `abridge run`: an agent behind a proxy of its own, its signals and exit
//! code passed on, what it did said at the end. The agent here is a small
//! Python program speaking Chat Completions through the generic form; the
//! real agents (Claude Code, Codex, Gemini CLI) run through their recipes
//! in sdk-tests/python/test_clients.py.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abridge_testkit::{Provider, ProviderOptions};
use serde_json::Value;

use crate::support::{run, text};

/// Posts `STEPS` Chat Completions requests to `$OPENAI_BASE_URL`, each
/// history a tool result longer than the last, and says it is done.
const AGENT: &str = r#"
import json, os, sys, urllib.request
base = os.environ["OPENAI_BASE_URL"]
assert os.environ["OPENAI_API_BASE"] == base
messages = [{"role": "system", "content": "You are a careful agent."},
            {"role": "user", "content": "Read every log."}]
for i in range(int(sys.argv[1])):
    body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    req = urllib.request.Request(base + "/chat/completions", body, {"content-type": "application/json", "authorization": "Bearer sk-test"})
    reply = json.load(urllib.request.urlopen(req))["choices"][0]["message"]
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_log", "arguments": json.dumps({"n": i})}}
    messages.append({"role": "assistant", "content": reply.get("content") or "", "tool_calls": [call]})
    log = "".join(f"step {i} line {k}: compiled crate_{k} in {k * 7 % 13}.{i}s\n" for k in range(120))
    messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": log})
print("done after", i + 1, "steps")
"#;

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-run-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_agent_runs_behind_its_own_proxy_and_the_summary_equals_the_provider_log() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider = rt.block_on(Provider::start(ProviderOptions::default()));
    let dir = tmp("generic");
    let config = dir.join("abridge.toml");
    std::fs::write(&config, "[trigger]\nmax_tokens = 6000\n").unwrap();
    let summary = dir.join("summary.json");
    let upstream = format!("{}/v1", provider.url);
    let o = run(
        &[
            "run",
            "--no-store",
            "--config",
            config.to_str().unwrap(),
            "--openai-upstream",
            &upstream,
            "--summary",
            summary.to_str().unwrap(),
            "--api",
            "openai",
            "--",
            "python3",
            "-c",
            AGENT,
            "12",
        ],
        None,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout).trim(),
        "done after 12 steps",
        "the agent's own output, untouched"
    );
    let err = text(&o.stderr);
    assert!(
        err.contains("abridge run: python3 exited with 0 after"),
        "{err}"
    );
    let report = provider.report();
    assert_eq!(report.requests.len(), 12);
    assert!(report.requests.iter().all(|r| r.violations.is_empty()));
    assert!(report.requests.iter().all(|r| r.tokens <= 6000), "bounded");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let t = &s["summary"]["totals"];
    let logged: u64 = report.requests.iter().map(|r| r.tokens).sum();
    assert_eq!(t["requests"], 12);
    assert_eq!(t["forwarded_tokens"].as_u64(), Some(logged), "{s}");
    assert!(t["client_tokens"].as_u64().unwrap() > logged, "{s}");
    assert!(s["summary"]["compactions"].as_u64().unwrap() >= 1, "{s}");
    assert!(
        t["cost_without"].as_f64().unwrap() > t["cost_compared"].as_f64().unwrap(),
        "{s}"
    );
    let forwarded = abridge_model::text::thousands(logged);
    assert!(err.contains(&format!("forwarded {forwarded}")), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Starts `abridge run` of a shell that traps the signals and prints
/// `ready`; the child and the shell's pid.
fn trapping(extra: &[&str]) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let script = "trap 'echo got-int; exit 42' INT; trap 'echo got-term; exit 43' TERM; \
                  echo ready; while :; do sleep 0.05; done";
    let mut args = vec!["run", "--no-store"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--api", "anthropic", "--", "sh", "-c", script]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_abridge"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (child, out)
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "abridge run did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sigint_to_abridge_run_reaches_the_agent_whose_exit_code_it_ends_with() {
    for (sig, said, code) in [("INT", "got-int", 42), ("TERM", "got-term", 43)] {
        let (mut child, mut out) = trapping(&[]);
        signal(child.id(), sig);
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), said);
        let status = wait(&mut child);
        assert_eq!(status.code(), Some(code), "the agent's exit code");
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains(&format!("sh exited with {code}")), "{err}");
    }
}

#[test]
fn status_shows_a_run_going_on_from_another_process() {
    let (mut child, _out) = trapping(&[]);
    let o = Command::new(env!("CARGO_BIN_EXE_abridge"))
        .args(["run", "--status"])
        .output()
        .unwrap();
    let shown = text(&o.stdout);
    assert!(shown.contains("abridge run: sh running after"), "{shown}");
    assert!(shown.contains(&format!("(pid {})", child.id())), "{shown}");
    signal(child.id(), "TERM");
    wait(&mut child);
    let o = Command::new(env!("CARGO_BIN_EXE_abridge"))
        .args(["run", "--status"])
        .output()
        .unwrap();
    assert!(
        !text(&o.stdout).contains(&format!("(pid {})", child.id())),
        "its entry goes with it"
    );
}

#[test]
fn list_names_the_recipes_and_an_unknown_agent_is_told_the_generic_form() {
    let o = run(&["run", "--list"], None);
    let listed = text(&o.stdout);
    for name in ["claude", "codex", "gemini", "opencode", "pi", "copilot"] {
        assert!(listed.lines().any(|l| l.starts_with(name)), "{listed}");
    }
    let o = run(&["run", "no-such-agent"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("abridge run --api openai|anthropic|gemini -- COMMAND"),
        "{}",
        text(&o.stderr)
    );
}
