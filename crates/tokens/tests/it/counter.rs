//! The per-message counter and its cache.

use abridge_model::{Message, Part, Role, decode};
use abridge_tokens::{IMAGE_TOKENS, Registry, TokenCounter, TokenizerKind};

#[test]
fn counts_by_kind() {
    let body = br#"{"messages": [
      {"role": "user", "content": [{"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
      {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "read", "arguments": "{\"path\": \"a.rs\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "fn main() {}"}
    ]}"#;
    let conv = &decode(body).unwrap()[0];
    let k = TokenizerKind::O200kBase;
    let mut counter = TokenCounter::new(k);
    let c = counter.count_messages(&conv.messages);
    assert_eq!(c[0].text, k.count("look"));
    assert_eq!(c[0].images, IMAGE_TOKENS);
    assert_eq!(c[1].text, k.count("ok"));
    assert_eq!(
        c[1].tool_args,
        k.count("read") + k.count("{\"path\": \"a.rs\"}")
    );
    assert_eq!(c[2].tool_results, k.count("fn main() {}"));
    assert_eq!(c[2].text, 0);
    assert!(
        c.iter()
            .all(|m| m.overhead == TokenizerKind::O200kBase.message_overhead())
    );
    assert_eq!(
        counter.count_conversation(conv),
        c.iter().map(|m| m.total()).sum::<abridge_tokens::Counted>()
    );
}

#[test]
fn growing_history_only_tokenizes_new_messages() {
    let mut history: Vec<Message> = Vec::new();
    let mut counter = TokenCounter::new(TokenizerKind::O200kBase);
    for i in 0..50 {
        history.push(Message::text(
            Role::User,
            format!("step {i}: run the tests again"),
        ));
        counter.count_messages(&history);
    }
    let (hits, misses) = counter.cache_stats();
    assert_eq!(misses, 50);
    assert_eq!(hits, (0..50).sum::<u64>());
}

#[test]
fn changed_content_is_recounted() {
    let mut counter = TokenCounter::new(TokenizerKind::Cl100kBase);
    let mut m = Message::text(Role::Assistant, "short");
    let before = counter.count_message(&m).total();
    m.parts
        .push(Part::text("and a good deal more text than before"));
    let after = counter.count_message(&m).total();
    assert!(after > before);
    assert_eq!(counter.cache_stats(), (0, 2));
}

#[test]
fn registry_matches_prefixes_and_overrides() {
    let mut r = Registry::new();
    assert_eq!(
        r.lookup("gpt-4o-2024-08-06").unwrap().context_window,
        128_000
    );
    assert_eq!(
        r.lookup("openai/gpt-4o-mini").unwrap().tokenizer,
        TokenizerKind::O200kBase
    );
    assert_eq!(
        r.lookup("gpt-4-0613").unwrap().tokenizer,
        TokenizerKind::Cl100kBase
    );
    assert_eq!(
        r.lookup("claude-opus-4-6").unwrap().tokenizer,
        TokenizerKind::ClaudeCalibrated
    );
    // Today's names, dated or not, and names newer than the table.
    assert_eq!(
        r.lookup("claude-sonnet-4-6").unwrap().context_window,
        1_000_000
    );
    assert_eq!(
        r.lookup("claude-opus-4-8-20261001").unwrap().max_output,
        128_000
    );
    let opus = r.lookup("claude-opus-5-5").unwrap().price.unwrap();
    assert_eq!(
        (opus.input, opus.cache_write, opus.cache_read),
        (4.0, 5.0, 0.4)
    );
    assert!(matches!(
        r.resolve("claude-sonnet-9-1"),
        abridge_tokens::Resolved::Family("claude-*", i) if i.tokenizer == TokenizerKind::ClaudeCalibrated
    ));
    assert!(matches!(
        r.resolve("gpt-7-preview"),
        abridge_tokens::Resolved::Family("gpt-*", _)
    ));
    assert!(matches!(
        r.resolve("o9-pro"),
        abridge_tokens::Resolved::Family("o*", _)
    ));
    assert!(matches!(
        r.resolve("gemini-3.5-ultra"),
        abridge_tokens::Resolved::Family("gemini-*", _)
    ));
    assert!(r.lookup("my-local-model").is_none());
    assert_eq!(
        r.tokenizer_for(Some("my-local-model")),
        TokenizerKind::O200kBase
    );
    let info = abridge_tokens::ModelInfo {
        context_window: 32_768,
        max_output: 4_096,
        tokenizer: TokenizerKind::Estimate,
        price: None,
    };
    r.set("my-local", info);
    assert_eq!(r.lookup("my-local-model"), Some(info));
    r.set("gpt-4o", info);
    assert_eq!(r.lookup("gpt-4o-2024-08-06"), Some(info));
}

#[test]
fn structured_tool_inputs_hash_by_content() {
    use abridge_model::{Arguments, ContentForm, ToolCall};
    let call = |input: serde_json::Value| Message {
        role: Role::Assistant,
        form: ContentForm::Blocks,
        parts: vec![Part::ToolCall(Box::new(ToolCall {
            id: "t".into(),
            name: "Edit".into(),
            arguments: Arguments::Value(input),
            extra: Default::default(),
            function_extra: Default::default(),
        }))],
        ..Message::default()
    };
    let h = |v| abridge_tokens::content_hash(&call(v));
    let a = serde_json::json!({"path": "a.rs", "n": [1, 2, {"k": null}]});
    assert_eq!(h(a.clone()), h(a));
    assert_ne!(
        h(serde_json::json!({"path": "a.rs"})),
        h(serde_json::json!({"path": "b.rs"}))
    );
    assert_ne!(
        h(serde_json::json!({"n": [1, 2]})),
        h(serde_json::json!({"n": [2, 1]}))
    );
    assert_ne!(
        h(serde_json::json!({"a": "b"})),
        h(serde_json::json!({"b": "a"}))
    );
    assert_ne!(h(serde_json::json!(["x"])), h(serde_json::json!("x")));
}

/// A history with more new text than one thread counts alone is counted on
/// every core, to the same figures, message by message, as one thread.
#[test]
fn a_large_new_history_counts_the_same_on_every_core() {
    let mut conv = abridge_model::Conversation::new(abridge_model::Family::OpenAi);
    for i in 0..400 {
        let text = format!(
            "step {i}: {} fn f{i}(x: u32) -> u32 {{ x * {i} }}\n",
            "prose words ".repeat(i % 50 + 60)
        );
        conv.messages.push(Message::text(
            if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            text,
        ));
    }
    let kind = TokenizerKind::O200kBase;
    let mut parallel = TokenCounter::new(kind);
    // A cache of one entry cannot take the prefill: one thread counts.
    let mut serial = TokenCounter::with_capacity(kind, 1);
    assert_eq!(
        parallel.count_conversation(&conv),
        serial.count_conversation(&conv)
    );
    assert_eq!(
        parallel.count_messages(&conv.messages),
        serial.count_messages(&conv.messages)
    );
    // On more than one core the counts came from the prefill (each message
    // tokenized once, then read from the cache): the parallel path ran.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (hits, misses) = parallel.cache_stats();
    assert_eq!(misses, 400, "each message tokenized once");
    if cores > 1 {
        assert_eq!(
            hits, 800,
            "read once after the prefill, once by count_messages"
        );
    }
}
