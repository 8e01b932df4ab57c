//! Each validator rule, on small hand-written bodies, plus decode errors.

use abridge_model::{Error, Format, Rule, decode, decode_as, validate};
use serde_json::{Value, json};

fn rules(body: Value) -> Vec<(usize, Option<String>, Rule)> {
    // Bodies with a top-level system prompt are Anthropic's.
    let format = body.get("system").map(|_| Format::Anthropic);
    let conv = &decode_as(body.to_string().as_bytes(), format).unwrap()[0];
    validate(conv)
        .into_iter()
        .map(|v| (v.index, v.id, v.rule))
        .collect()
}

fn call(id: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}})
}

fn id(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn openai_rules() {
    let user = json!({"role": "user", "content": "go"});
    let tool = |i: &str| json!({"role": "tool", "tool_call_id": i, "content": "r"});
    let asst =
        |calls: Vec<Value>| json!({"role": "assistant", "content": null, "tool_calls": calls});
    // Valid, with parallel calls answered in any order.
    assert_eq!(
        rules(json!({"messages": [user, asst(vec![call("a"), call("b")]), tool("b"), tool("a")]})),
        vec![]
    );
    // A user message before the results.
    assert_eq!(
        rules(json!({"messages": [user, asst(vec![call("a")]), user, tool("a")]})),
        vec![
            (1, id("a"), Rule::UnansweredCall),
            (3, id("a"), Rule::OrphanResult)
        ]
    );
    // Answered twice.
    assert_eq!(
        rules(json!({"messages": [user, asst(vec![call("a")]), tool("a"), tool("a")]})),
        vec![(3, id("a"), Rule::DuplicateResult)]
    );
    // Duplicate ids in one step; reuse in a later step is accepted.
    assert_eq!(
        rules(json!({"messages": [user, asst(vec![call("a"), call("a")]), tool("a"), tool("a")]})),
        vec![(1, id("a"), Rule::DuplicateCallId)]
    );
    assert_eq!(
        rules(
            json!({"messages": [user, asst(vec![call("a")]), tool("a"), asst(vec![call("a")]), tool("a")]})
        ),
        vec![]
    );
    // The log ends mid-step.
    assert_eq!(
        rules(json!({"messages": [user, asst(vec![call("a"), call("b")]), tool("a")]})),
        vec![(1, id("b"), Rule::PendingFinalCall)]
    );
    // Unknown role.
    assert_eq!(
        rules(json!({"messages": [user, {"role": "exit", "content": "bye"}]})),
        vec![(1, None, Rule::RoleNotAllowed("exit".into()))]
    );
}

#[test]
fn anthropic_rules() {
    let use_ = |i: &str| json!({"type": "tool_use", "id": i, "name": "f", "input": {}});
    let res = |i: &str| json!({"type": "tool_result", "tool_use_id": i, "content": "r"});
    let text = json!({"type": "text", "text": "t"});
    let body = |messages: Value| json!({"system": "s", "messages": messages});
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "assistant", "content": [text, use_("a"), use_("b")]},
            {"role": "user", "content": [res("a"), res("b"), text]}]))),
        vec![]
    );
    // Results must come first.
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_("a")]},
            {"role": "user", "content": [text, res("a")]}]))),
        // Indices count the system prompt as message 0.
        vec![
            (2, id("a"), Rule::UnansweredCall),
            (3, id("a"), Rule::ResultNotFirst)
        ]
    );
    // Results must be in the very next message.
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_("a")]},
            {"role": "assistant", "content": [text]},
            {"role": "user", "content": [res("a")]}]))),
        vec![
            (2, id("a"), Rule::UnansweredCall),
            (4, id("a"), Rule::OrphanResult)
        ]
    );
    // Ids are unique in the whole conversation.
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_("a")]}, {"role": "user", "content": [res("a")]},
            {"role": "assistant", "content": [use_("a")]}, {"role": "user", "content": [res("a")]}]))),
        vec![(4, id("a"), Rule::DuplicateCallId)]
    );
    // Roles and empty content.
    assert_eq!(
        rules(body(
            json!([{"role": "user", "content": ""}, {"role": "tool", "content": "x"}, {"role": "user", "content": "y"}])
        )),
        vec![
            (1, None, Rule::EmptyContent),
            (2, None, Rule::RoleNotAllowed("tool".into()))
        ]
    );
    // System messages inside `messages`, as Claude Code sends them, are
    // accepted; not between a call and its results.
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "system", "content": "# Environment"},
            {"role": "assistant", "content": [use_("a")]},
            {"role": "user", "content": [res("a")]},
            {"role": "system", "content": [text]}]))),
        vec![]
    );
    assert_eq!(
        rules(body(json!([{"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_("a")]},
            {"role": "system", "content": "late"},
            {"role": "user", "content": [res("a")]}]))),
        vec![
            (2, id("a"), Rule::UnansweredCall),
            (4, id("a"), Rule::OrphanResult)
        ]
    );
    // Messages are named by their place in the body's own `messages` array.
    let conv = &decode(
        body(
            json!([{"role": "user", "content": "go"}, {"role": "assistant", "content": [use_("a")]},
        {"role": "user", "content": "no results"}]),
        )
        .to_string()
        .as_bytes(),
    )
    .unwrap()[0];
    assert_eq!(
        validate(conv)[0].to_string(),
        "messages[1]: tool call a has no result where the API needs it"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let err = |s: &str| decode(s.as_bytes()).unwrap_err();
    match err("{\"messages\": [\n  {\"role\": \"user\",, }]}") {
        Error::Json { line, column, .. } => assert_eq!((line, column), (2, 19)),
        other => panic!("{other}"),
    }
    let e = err(r#"{"messages": [{"role": "user", "content": 5}]}"#);
    assert_eq!(
        e.to_string(),
        "messages[0].content: expected a string, an array or null, found a number"
    );
    let e = err(r#"{"messages": [{"role": "tool", "content": "x"}]}"#);
    assert_eq!(
        e.to_string(),
        "messages[0]: expected a \"tool_call_id\" field"
    );
    let e = err(
        r#"{"system": "s", "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]}"#,
    );
    assert_eq!(
        e.to_string(),
        "messages[0].content[0]: expected a \"id\" field"
    );
    assert!(matches!(err("[1, 2]"), Error::UnknownFormat(_)));
    assert!(matches!(err("\"hello\""), Error::UnknownFormat(_)));
    assert!(matches!(err(""), Error::Json { .. }));
    let e = decode(b"{\"messages\": [\xff]}").unwrap_err();
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    // A broken line in a Claude Code log names its line.
    let log = "{\"type\":\"user\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{\"type\": oops}\n";
    match decode(log.as_bytes()).unwrap_err() {
        Error::Json { line, .. } => assert_eq!(line, 2),
        other => panic!("{other}"),
    }
}

#[test]
fn huge_and_odd_messages_do_not_panic() {
    let big = "x".repeat(5_000_000);
    let body = json!({"messages": [{"role": "user", "content": big}, {"role": "user", "content": "\u{202e}\u{0}\u{fffd}🧪"}]});
    let conv = &decode(body.to_string().as_bytes()).unwrap()[0];
    assert_eq!(abridge_model::encode(conv).unwrap(), body);
}
