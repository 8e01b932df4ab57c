//! Every provider behaviour the cascade must survive ends with a valid
//! conversation at or under target, and the right report and events.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abridge::model::Family;
use abridge::model::{Conversation, validate};
use abridge::synth::{Spec, run};
use abridge::{Compactor, Config, Event, PolicyKind, Report};
use abridge_llm::{Blocking, DEFAULT_PROMPT, LlmSummarizer};

use abridge_testkit::{Mock, Reply, anthropic_ok, openai_ok};

pub(crate) const BRIEFING: &str = "## Task\nCollect price, SKU and stock for category C-17.\n\n## Progress\nVisited product pages; several selectors failed on the cookie banner. IN-PROGRESS.\n\n## Current state and next step\nContinue with the next product page.";

pub(crate) fn conversation() -> Conversation {
    run(Spec {
        iterations: 24,
        page_lines: 20,
        ..Spec::default()
    })
}

/// Compacts with `[llm, offline]` through the summarize step only.
pub(crate) fn compact(
    conv: &Conversation,
    llm: LlmSummarizer,
) -> (Conversation, Report, Vec<Event>, u64) {
    let mut cfg = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    let total = Compactor::new(cfg.clone()).unwrap().count(conv).get();
    let target = total / 4;
    cfg.policies.pipeline = vec![PolicyKind::Summarize, PolicyKind::DropIterations];
    cfg.budget.target_tokens = Some(target);
    cfg.budget.min_iterations = 2;
    let mut c = Compactor::new(cfg).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    c.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    c.set_summarizers(vec![Box::new(Blocking::new(llm))]);
    let out = c.compact(conv).unwrap();
    let after = out.conversation.into_owned();
    assert!(validate(&after).is_empty(), "{:?}", validate(&after));
    assert!(
        out.report.tokens_after.get() <= target,
        "{} > {target}",
        out.report.tokens_after
    );
    let events = events.lock().unwrap().clone();
    (after, out.report, events, target)
}

pub(crate) fn briefing_of(conv: &Conversation) -> String {
    conv.messages[2].text_content().into_owned()
}

pub(crate) fn openai(mock: &Mock) -> LlmSummarizer {
    LlmSummarizer::new(Family::OpenAi, "test-model")
        .base_url(format!("{}/v1", mock.url))
        .key(Some("sk-test".into()))
        .timeout(Duration::from_secs(5))
}

/// The fallback happened: the offline sheet was used after `error` from the LLM.
fn assert_fell_back(report: &Report, events: &[Event], error: &str) {
    assert_eq!(report.attempts.len(), 2, "{:?}", report.attempts);
    assert!(!report.attempts[0].used());
    let e = report.attempts[0].error().unwrap().to_string();
    assert!(e.contains(error), "{e}");
    assert!(report.attempts[1].used());
    assert_eq!(report.summarizer.as_deref(), Some("offline"));
    let compacted: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::HistoryCompacted { .. }))
        .collect();
    assert_eq!(compacted.len(), 1);
    assert!(
        matches!(compacted[0], Event::HistoryCompacted { summarizer: Some(s), .. } if s == "offline")
    );
}

#[test]
fn openai_success_sends_the_prompt_and_history_and_verifies() {
    let mock = Mock::start(vec![openai_ok(BRIEFING)]);
    let conv = conversation();
    let (after, report, events, _) = compact(&conv, openai(&mock));
    assert_eq!(report.summarizer.as_deref(), Some("openai:test-model"));
    let b = briefing_of(&after);
    assert!(
        b.starts_with("<compacted-history>\n## Task\nCollect price"),
        "{b}"
    );
    // Verification appended identifiers the LLM left out.
    let v = report.attempts[0].verification().unwrap();
    assert!(!v.appended_facts.is_empty());
    assert!(b.contains("## Verbatim facts"));
    assert!(events.iter().any(|e| matches!(e, Event::HistoryCompacted { summarizer: Some(s), .. } if s == "openai:test-model")));
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["messages"][0]["content"], DEFAULT_PROMPT);
    let user = req.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("<history>") && (user.contains("[navigate: ") || user.contains("[click: ")),
        "{user}"
    );
    assert!(user.contains("<recent-steps>"));
}

#[test]
fn anthropic_success() {
    let mock = Mock::start(vec![anthropic_ok(BRIEFING)]);
    let llm = LlmSummarizer::new(Family::Anthropic, "claude-test")
        .base_url(mock.url.clone())
        .key(Some("k-1".into()));
    let (after, report, _, _) = compact(&conversation(), llm);
    assert_eq!(report.summarizer.as_deref(), Some("anthropic:claude-test"));
    assert!(briefing_of(&after).contains("Collect price"));
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("k-1"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.body["system"], DEFAULT_PROMPT);
}

#[test]
fn server_error_falls_back_to_offline() {
    let mock = Mock::start(vec![Reply::Http(
        500,
        "{\"error\": \"boom\"}".into(),
        vec![],
    )]);
    let (after, report, events, _) = compact(&conversation(), openai(&mock));
    assert_fell_back(&report, &events, "HTTP 500");
    let b = briefing_of(&after);
    assert!(
        b.contains("\n## ") && !b.contains("boom"),
        "error text never becomes briefing text"
    );
}

#[test]
fn rate_limit_with_retry_after_is_retried_once() {
    let mock = Mock::start(vec![
        Reply::Http(429, "{}".into(), vec![("retry-after", "1".into())]),
        openai_ok(BRIEFING),
    ]);
    let (_, report, _, _) = compact(&conversation(), openai(&mock));
    assert_eq!(mock.requests().len(), 2);
    assert!(report.attempts[0].used(), "{:?}", report.attempts);
    assert!(report.attempts[0].ms >= 1_000);
}

#[test]
fn timeout_falls_back_without_waiting_for_the_server() {
    let mock = Mock::start(vec![Reply::Hang(Duration::from_secs(4))]);
    let start = Instant::now();
    let (_, report, events, _) = compact(
        &conversation(),
        openai(&mock).timeout(Duration::from_millis(800)),
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    assert_fell_back(&report, &events, "timed out");
}

#[test]
fn empty_and_junk_bodies_fall_back() {
    for (body, error) in [
        ("", "empty response body"),
        ("<html>oops</html>", "not JSON"),
        ("{\"choices\": []}", "no briefing text"),
    ] {
        let mock = Mock::start(vec![Reply::Http(200, body.into(), vec![])]);
        let (_, report, events, _) = compact(&conversation(), openai(&mock));
        assert_fell_back(&report, &events, error);
    }
}

#[test]
fn a_briefing_longer_than_its_input_is_rejected() {
    let long = format!(
        "## Task\n{}",
        "This repeats without saying anything new. ".repeat(4_000)
    );
    let mock = Mock::start(vec![openai_ok(&long)]);
    let (after, report, events, _) = compact(&conversation(), openai(&mock));
    assert_fell_back(&report, &events, "rejected briefing");
    assert!(!briefing_of(&after).contains("This repeats"));
}

#[test]
fn a_briefing_that_leaks_the_wrapper_is_rejected() {
    let leaky = format!("<compacted-history>\n{BRIEFING}\n</compacted-history>");
    let mock = Mock::start(vec![openai_ok(&leaky)]);
    let (after, report, events, _) = compact(&conversation(), openai(&mock));
    assert_fell_back(&report, &events, "contains <compacted-history> tags");
    assert_eq!(
        abridge::model::encode(&after)
            .unwrap()
            .to_string()
            .matches("<compacted-history>")
            .count(),
        1
    );
}

#[test]
fn a_briefing_that_copies_its_prompt_blocks_is_rejected() {
    for tag in ["previous-briefing", "history", "recent-steps", "task-list"] {
        let copied = format!("{BRIEFING}\n<{tag}>\n- [pending] something\n</{tag}>");
        let mock = Mock::start(vec![openai_ok(&copied)]);
        let (after, report, events, _) = compact(&conversation(), openai(&mock));
        assert_fell_back(
            &report,
            &events,
            &format!("holds the prompt's <{tag}> block"),
        );
        assert!(
            !abridge::model::encode(&after)
                .unwrap()
                .to_string()
                .contains(&format!("<{tag}>"))
        );
    }
}

/// What the summarizer's provider reported a briefing cost is on its
/// attempt, whether the briefing was used or rejected, and prices at the
/// summarizer model's rates.
#[test]
fn the_summarizers_usage_is_on_its_attempts() {
    let mock = Mock::start(vec![abridge_testkit::openai_ok_reporting(
        BRIEFING, 5_000, 1_000, 300,
    )]);
    let (_, report, _, _) = compact(&conversation(), openai(&mock));
    let usage = report.attempts[0].usage.expect("the usage reported");
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.output_tokens
        ),
        (4_000, 1_000, 300)
    );
    assert_eq!(report.summarizer_usage(), Some(usage));
    // Rejected (it copies its prompt), it still cost what it cost.
    let copied = format!("{BRIEFING}\n<history>\nx\n</history>");
    let mock = Mock::start(vec![abridge_testkit::openai_ok_reporting(
        &copied, 5_000, 0, 300,
    )]);
    let (_, report, _, _) = compact(&conversation(), openai(&mock));
    assert!(!report.attempts[0].used());
    assert_eq!(
        report.attempts[1].usage, None,
        "the offline sheet costs nothing"
    );
    assert_eq!(
        report.summarizer_usage().map(|u| u.output_tokens),
        Some(300)
    );
    // Priced at the summarizer's model, unpriced for an unknown one.
    let engine = abridge::Engine::new(Config::default()).unwrap();
    let mut a = report.attempts[0].clone();
    assert_eq!(engine.attempt_cost(&a), None, "test-model has no price");
    a.summarizer = "openai:gpt-4o-mini".into();
    let price = abridge::tokens::Registry::new()
        .lookup("gpt-4o-mini")
        .and_then(|m| m.price)
        .unwrap();
    assert_eq!(engine.attempt_cost(&a), Some(price.cost(&a.usage.unwrap())));
}

#[test]
fn an_unverified_completion_is_flagged() {
    use abridge::model::{Arguments, ContentForm, Message, Part, Role, ToolCall, ToolResult};
    let mut conv = Conversation::new(abridge::model::Family::OpenAi);
    conv.model = Some("gpt-4o".into());
    conv.messages
        .push(Message::text(Role::System, "You are a coding agent."));
    conv.messages
        .push(Message::text(Role::User, "Make the test suite pass."));
    for i in 0..6 {
        let id = format!("call_{i}");
        let cmd = if i == 1 { "make test" } else { "make lint" };
        let mut a = Message {
            role: Role::Assistant,
            form: ContentForm::Null,
            ..Message::default()
        };
        a.parts.push(Part::ToolCall(Box::new(ToolCall {
            id: id.clone(),
            name: "shell".into(),
            arguments: Arguments::Json(serde_json::json!({"command": cmd}).to_string()),
            extra: [("type".to_owned(), serde_json::json!("function"))]
                .into_iter()
                .collect(),
            function_extra: Default::default(),
        })));
        conv.messages.push(a);
        let out = if i == 1 {
            "exit status 2\nFAILED tests/test_api.py::test_login"
        } else {
            "exit status 0"
        };
        conv.messages.push(Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(Box::new(ToolResult {
                call_id: id,
                parts: vec![Part::text(format!(
                    "{out}\n{}",
                    "output line\n".repeat(if i < 4 { 60 } else { 2 })
                ))],
                form: ContentForm::Text,
                is_error: None,
                extra: Default::default(),
            }))],
            form: ContentForm::Absent,
            ..Message::default()
        });
    }
    let claim = "## Progress\n- Ran make test: all tests passed, step completed.\n- Lint is clean.";
    let mock = Mock::start(vec![openai_ok(claim)]);
    let (after, report, _, _) = compact(&conv, openai(&mock));
    assert_eq!(report.summarizer.as_deref(), Some("openai:test-model"));
    let v = report.attempts[0].verification().unwrap();
    assert_eq!(
        v.unverified_claims,
        ["- Ran make test: all tests passed, step completed."]
    );
    let b = briefing_of(&after);
    assert!(b.contains("## Unverified claims"), "{b}");
    // The failure the LLM glossed over is restored verbatim.
    assert!(
        b.contains("- `FAILED tests/test_api.py::test_login`"),
        "{b}"
    );
}
