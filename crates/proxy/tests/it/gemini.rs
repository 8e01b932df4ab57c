//! The Gemini API through the proxy: an agent loop that talks as Gemini
//! CLI does (turns of parts, its own call ids, `{"output": …}` responses,
//! the key in `x-goog-api-key`, streams with `alt=sse`) stays under the
//! trigger, valid, with its system instruction, tools and every thought
//! signature it kept byte for byte.

use abridge_testkit::{ProviderOptions, ProviderReport};
use serde_json::{Value, json};

use crate::CONFIG;
use crate::support::{LoopLog, client, file_content, metric, metrics_text, start};

const MODEL: &str = "gemini-2.5-pro";

fn options() -> ProviderOptions {
    ProviderOptions {
        max_tokens: Some(6000),
        ..ProviderOptions::default()
    }
}

/// The request a Gemini CLI-like agent sends with `contents`.
fn body(contents: &[Value]) -> Value {
    json!({
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are a careful coding agent."}]},
        "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Read a file",
            "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                "required": ["path"]}}]}],
        "generationConfig": {"temperature": 1, "thinkingConfig": {"includeThoughts": true}},
    })
}

/// The parts of a model turn: a whole response's, or a stream's chunks'
/// (`data:` events, or one JSON array) in order.
fn model_parts(text: &str, sse: bool) -> Vec<Value> {
    let chunks: Vec<Value> = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    } else {
        match serde_json::from_str(text).unwrap() {
            Value::Array(chunks) => chunks,
            one => vec![one],
        }
    };
    chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// `turns` requests of a Gemini CLI-like agent through the proxy, whole,
/// streamed as events (`sse`) or as one JSON array (`array`).
pub(crate) async fn gemini_loop(
    proxy: &str,
    turns: usize,
    how: &str,
    headers: &[(&str, &str)],
) -> LoopLog {
    gemini_loop_with(proxy, turns, how, headers, &[]).await
}

/// [`gemini_loop`] with `fields` set in every request body.
async fn gemini_loop_with(
    proxy: &str,
    turns: usize,
    how: &str,
    headers: &[(&str, &str)],
    fields: &[(&str, Value)],
) -> LoopLog {
    let http = client();
    let mut contents =
        vec![json!({"parts": [{"text": "Read every module and report."}], "role": "user"})];
    let mut log = LoopLog::default();
    for turn in 0..turns {
        let (method, query) = match how {
            "sse" => ("streamGenerateContent", "?alt=sse"),
            "array" => ("streamGenerateContent", ""),
            _ => ("generateContent", ""),
        };
        let mut request = body(&contents);
        for (k, v) in fields {
            request[*k] = v.clone();
        }
        let mut req = http
            .post(format!("{proxy}/v1beta/models/{MODEL}:{method}{query}"))
            .header("x-goog-api-key", "gemini-test-key")
            .json(&request);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "turn {turn}");
        log.note(resp.headers());
        let mut parts = model_parts(&resp.text().await.unwrap(), how == "sse");
        // As Gemini CLI does: thoughts are not sent back; each call gets an id.
        parts.retain(|p| p["thought"] != true);
        let mut responses = Vec::new();
        for (i, p) in parts.iter_mut().enumerate() {
            if let Some(call) = p.get_mut("functionCall") {
                let id = format!("{}_{turn}_{i}", call["name"].as_str().unwrap());
                call["id"] = json!(id);
                responses.push(json!({"functionResponse": {"name": call["name"],
                    "response": {"output": file_content(turn)}, "id": id}}));
            }
        }
        contents.push(json!({"parts": parts, "role": "model"}));
        // A turn that called nothing ended: the user speaks next.
        if responses.is_empty() {
            responses.push(json!({"text": "Go on."}));
        }
        contents.push(json!({"parts": responses, "role": "user"}));
    }
    log
}

/// Every request valid, under the limit, with the agent's own system
/// instruction and tools and no signature it was not given; the prefix
/// changes only when the proxy compacted.
fn assert_bounded(report: &ProviderReport, compactions: usize) {
    assert!(compactions > 0, "the loop should have compacted");
    let head = report.requests[0].head_hash;
    for (i, r) in report.requests.iter().enumerate() {
        assert!(r.violations.is_empty(), "request {i}: {:?}", r.violations);
        assert!(!r.over_limit, "request {i}: {} tokens", r.tokens);
        assert_eq!(
            r.head_hash, head,
            "request {i}: system instruction or tools changed"
        );
        assert_eq!(
            r.altered_reasoning, 0,
            "request {i}: a thought signature changed"
        );
        assert!(
            r.headers.iter().any(|h| h == "x-goog-api-key"),
            "request {i}"
        );
        assert!(
            !r.headers
                .iter()
                .any(|h| h == "authorization" || h == "x-api-key")
        );
    }
    let breaks = report
        .requests
        .iter()
        .filter(|r| r.prefix_kept == Some(false))
        .count();
    assert!(
        breaks <= compactions,
        "{breaks} prefix changes for {compactions} compactions"
    );
    let signed = report.requests.last().unwrap().reasoning_items;
    assert!(signed > 0, "the kept turns keep their signatures");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_60_turn_gemini_loop_stays_under_the_trigger() {
    let setup = start(CONFIG, options(), None).await;
    let log = gemini_loop(&setup.proxy, 60, "whole", &[]).await;
    let metrics = metrics_text(&setup.proxy).await;
    let report = setup.provider.report();
    assert_eq!(report.requests.len(), 60);
    assert!(
        report
            .requests
            .iter()
            .all(|r| r.path == format!("/v1beta/models/{MODEL}:generateContent"))
    );
    assert_bounded(&report, log.compacted);
    assert!(
        log.sessions.iter().all(|s| s == &log.sessions[0]),
        "one session"
    );
    assert_eq!(
        metric(
            &metrics,
            "abridge_requests_total{route=\"gemini\",status=\"200\"}"
        ),
        60.0
    );
    // After the first, each request was taken in parts: only its new turns decoded.
    let added = metric(&metrics, "abridge_decoded_total{part=\"added\"}");
    assert!(added >= 57.0, "{metrics}");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_streams_stay_under_the_trigger_both_ways() {
    for how in ["sse", "array"] {
        let setup = start(CONFIG, options(), None).await;
        let log = gemini_loop(&setup.proxy, 40, how, &[]).await;
        let report = setup.provider.report();
        assert!(report.requests.iter().all(|r| r.stream), "{how}");
        assert_bounded(&report, log.compacted);
        setup.stop().await;
    }
}

/// A request on server-held cached content: the server puts it before
/// the request's own `contents`, which the proxy compacts as usual; the
/// name goes on every request as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contents_on_server_cached_content_are_compacted_and_the_name_kept() {
    let setup = start(CONFIG, options(), None).await;
    let cached = [("cachedContent", json!("cachedContents/abc123"))];
    let log = gemini_loop_with(&setup.proxy, 30, "whole", &[], &cached).await;
    // The head (system, tools, cachedContent) is the first request's.
    assert_bounded(&setup.provider.report(), log.compacted);
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_in_a_json_array_stream_is_answered_and_merged() {
    let setup = start(CONFIG, ProviderOptions::default(), None).await;
    let log = gemini_loop(&setup.proxy, 14, "array", &[("x-fake-recall", "alone")]).await;
    assert!(log.compacted > 0);
    let report = setup.provider.report();
    let (continued, own): (Vec<_>, Vec<_>) =
        report.requests.iter().partition(|r| !r.recalled.is_empty());
    assert!(!continued.is_empty(), "no recall was answered");
    assert!(
        own.iter().all(|r| r.recall_calls == 0),
        "the client saw a recall call"
    );
    for r in &report.requests {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.altered_reasoning, 0);
    }
    assert!(continued.iter().all(|r| r.recalled[0].contains("abr_")));
    setup.stop().await;
}
