//! The agent-facing status message and compact_history tool.

use abridge::agent::{TOOL_NAME, compact_history_tool, handle_compact_history, status_message};
use abridge::model::{
    Arguments, ContentForm, Conversation, Extra, Family, Message, Part, Role, ToolCall, encode,
    validate,
};
use abridge::synth::{Spec, run};
use abridge::tokens::Calibrated;
use abridge::tokens::Price;
use abridge::{Compactor, Config};
use serde_json::json;

#[test]
fn status_message_reports_use_cost_and_hint() {
    let m = status_message(
        Calibrated::new(96_000),
        Some(Calibrated::new(128_000)),
        Some(Price::anthropic(2.5, 10.0)),
        0.7,
    );
    assert_eq!(m.role, Role::User);
    assert_eq!(
        m.text_content(),
        "[context status] 96000 tokens in use of a 128000-token window (75.0%). Sending this context costs about $0.3000 uncached, $0.0240 while its prefix stays cached. \
         The history is getting long: call compact_history to condense older steps (recent ones stay verbatim)."
    );
    let calm = status_message(
        Calibrated::new(10_000),
        Some(Calibrated::new(128_000)),
        None,
        0.7,
    )
    .text_content()
    .into_owned();
    assert!(
        !calm.contains("compact_history") && calm.contains("(7.8%)"),
        "{calm}"
    );
}

#[test]
fn tool_declarations_fit_each_api() {
    let mut c = Conversation::new(Family::OpenAi);
    c.messages.push(Message::text(Role::User, "hi"));
    c.tools = Some(vec![compact_history_tool(Family::OpenAi)]);
    let body = encode(&c).unwrap();
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], TOOL_NAME);
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["preserve_recent"]["type"],
        "integer"
    );
    let mut a = Conversation::new(Family::Anthropic);
    a.messages.push(Message::text(Role::User, "hi"));
    a.tools = Some(vec![compact_history_tool(Family::Anthropic)]);
    let body = encode(&a).unwrap();
    assert_eq!(body["tools"][0]["name"], TOOL_NAME);
    assert!(body["tools"][0]["input_schema"]["properties"]["focus"].is_object());
    assert!(body["tools"][0].get("type").is_none());
}

fn with_call(family: Family, iterations: usize, args: serde_json::Value) -> Conversation {
    let mut conv = run(Spec {
        iterations,
        family,
        ..Spec::default()
    });
    let mut m = Message {
        role: Role::Assistant,
        form: ContentForm::Blocks,
        ..Message::default()
    };
    let mut extra = Extra::new();
    let arguments = match family {
        Family::OpenAi => {
            extra.insert("type".into(), json!("function"));
            Arguments::Json(args.to_string())
        }
        Family::Anthropic | Family::Gemini => Arguments::Value(args),
    };
    m.parts.push(Part::ToolCall(Box::new(ToolCall {
        id: "compact-1".into(),
        name: TOOL_NAME.into(),
        arguments,
        extra,
        function_extra: Extra::new(),
    })));
    conv.messages.push(m);
    conv
}

#[test]
fn the_agent_can_compact_its_own_history() {
    for family in [Family::OpenAi, Family::Anthropic] {
        let conv = with_call(
            family,
            20,
            json!({"preserve_recent": 2, "focus": "SKU values"}),
        );
        let mut c = Compactor::new(Config {
            model: conv.model.clone(),
            ..Config::default()
        })
        .unwrap();
        let before = c.count(&conv).get();
        let out = handle_compact_history(&mut c, &conv).unwrap();
        assert!(
            validate(&out).is_empty(),
            "{family:?}: {:?}",
            validate(&out)
        );
        assert!(c.count(&out).get() < before / 2, "{family:?}");
        let briefing = out.messages[2].text_content();
        assert!(
            briefing.contains("Focus requested by the agent: SKU values"),
            "{briefing}"
        );
        let last = out.messages.last().unwrap();
        let result = last.tool_results().next().unwrap();
        assert_eq!(result.call_id, "compact-1");
        assert!(
            result.text().starts_with("History compacted:"),
            "{}",
            result.text()
        );
        // The call and the two iterations before it are intact.
        assert!(
            out.messages[out.messages.len() - 2]
                .tool_calls()
                .any(|c| c.name == TOOL_NAME)
        );
    }
}

#[test]
fn nothing_to_compact_is_answered_too() {
    let conv = with_call(Family::OpenAi, 1, json!({}));
    let mut c = Compactor::new(Config::default()).unwrap();
    let out = handle_compact_history(&mut c, &conv).unwrap();
    assert_eq!(out.messages.len(), conv.messages.len() + 1);
    assert!(validate(&out).is_empty());
    assert!(
        out.messages
            .last()
            .unwrap()
            .tool_results()
            .next()
            .unwrap()
            .text()
            .starts_with("Nothing to compact")
    );
}
