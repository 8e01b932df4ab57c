//! The agent-facing status message and compact_history tool.

use abridge::agent::{
    Keep, Status, TOOL_NAME, add_status, compact_history_tool, handle_compact_history,
    parse_arguments, status_message,
};
use abridge::model::{
    Arguments, ContentForm, Conversation, Extra, Family, Message, Part, Role, ToolCall, encode,
    validate,
};
use abridge::synth::{Spec, run};
use abridge::tokens::Calibrated;
use abridge::tokens::Price;
use abridge::{Compactor, Config, Input};
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
        "--- STATUS UPDATE ---\nToken Usage: 96000/128000 (75%)\n\
         Sending this context costs about $0.3000, $0.0240 while its prefix stays cached.\n\
         Token usage is high (>70%): call the 'compact_history' tool to condense older messages (recent ones stay verbatim).\n\
         --- END STATUS ---"
    );
    let calm = Status {
        tokens: Calibrated::new(10_000),
        window: Some(Calibrated::new(128_000)),
        price: None,
        spent: Some(0.25),
        tool: Some("compactHistory"),
        hint_at: 0.5,
    }
    .text();
    assert!(
        calm.contains("(8%)") && calm.contains("Cost So Far: $0.2500"),
        "{calm}"
    );
    assert!(
        calm.contains("If token usage is high (>50%), consider using the 'compactHistory' tool"),
        "{calm}"
    );
    let unoffered = Status {
        tool: None,
        window: None,
        ..Status {
            tokens: Calibrated::new(10_000),
            window: None,
            price: None,
            spent: None,
            tool: None,
            hint_at: 0.7,
        }
    }
    .text();
    assert!(
        unoffered.contains("Token Usage: 10000 (window unknown)") && !unoffered.contains("tool"),
        "{unoffered}"
    );
}

#[test]
fn a_status_note_goes_where_every_api_takes_it() {
    for family in [Family::OpenAi, Family::Anthropic, Family::Gemini] {
        let mut conv = run(Spec {
            iterations: 3,
            family,
            ..Spec::default()
        });
        let before = conv.messages.len();
        assert!(add_status(&mut conv, "--- STATUS UPDATE ---".into()));
        assert!(
            validate(&conv).is_empty(),
            "{family:?}: {:?}",
            validate(&conv)
        );
        encode(&conv).unwrap();
        let last = conv.messages.last().unwrap();
        assert_eq!(last.role, Role::User, "{family:?}");
        assert!(last.text_content().contains("STATUS UPDATE"), "{family:?}");
        match family {
            // A message of its own after the tool messages.
            Family::OpenAi => assert_eq!(conv.messages.len(), before + 1),
            // In the user turn of tool results, after them: turns alternate.
            _ => {
                assert_eq!(conv.messages.len(), before);
                assert!(last.tool_results().next().is_some(), "{family:?}");
                assert!(matches!(last.parts.last(), Some(Part::Text(_))));
            }
        }
    }
    // Nothing after the model's own last turn.
    let mut prefill = with_call(Family::Anthropic, 2, json!({}));
    assert!(!add_status(&mut prefill, "note".into()));
}

#[test]
fn kept_messages_widen_to_whole_iterations() {
    let conv = run(Spec {
        iterations: 6,
        family: Family::OpenAi,
        ..Spec::default()
    });
    let its = conv.iterations();
    let len = conv.messages.len();
    let last_len = its.last().unwrap().end - its.last().unwrap().start;
    let req = |v: serde_json::Value| parse_arguments(&Arguments::Value(v));
    // One message: the iteration it is in.
    assert_eq!(
        req(json!({"preserve_recent_messages": 1})).keep_iterations(&conv.messages),
        1
    );
    // One more than the last iteration holds reaches into the one before.
    let n = last_len + 1;
    assert_eq!(
        req(json!({"preserve_recent_messages": n})).keep_iterations(&conv.messages),
        2
    );
    // mycoder's default (10), and its bound (50).
    let default = req(json!({}));
    assert_eq!(default.keep, Keep::Messages(10));
    assert_eq!(
        req(json!({"preserve_recent_messages": 500})).keep,
        Keep::Messages(50)
    );
    assert!(default.keep_iterations(&conv.messages) <= its.len());
    assert!(len > 10);
    // The first form of the tool still reads.
    let first = req(json!({"preserve_recent": 2, "focus": "SKU values"}));
    assert_eq!(first.keep, Keep::Iterations(2));
    assert_eq!(first.focus.as_deref(), Some("SKU values"));
    let custom = req(json!({"custom_prompt": " the failing tests "}));
    assert_eq!(custom.focus.as_deref(), Some("the failing tests"));
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
        body["tools"][0]["function"]["parameters"]["properties"]["preserve_recent_messages"]["type"],
        "integer"
    );
    let mut a = Conversation::new(Family::Anthropic);
    a.messages.push(Message::text(Role::User, "hi"));
    a.tools = Some(vec![compact_history_tool(Family::Anthropic)]);
    let body = encode(&a).unwrap();
    assert_eq!(body["tools"][0]["name"], TOOL_NAME);
    assert!(body["tools"][0]["input_schema"]["properties"]["custom_prompt"].is_object());
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
            .ends_with("No changes made.")
    );
}

#[test]
fn only_on_request_leaves_compaction_to_the_agent() {
    let conv = with_call(Family::OpenAi, 20, json!({"preserve_recent_messages": 4}));
    let mut history = conv.clone();
    history.messages.pop();
    let config = |only: bool| {
        let mut c =
            Config::from_toml("[trigger]\nmax_tokens = 500\n[agent]\ncompact_tool = true").unwrap();
        c.agent.only_on_request = only;
        c.model = conv.model.clone();
        c
    };
    // The token trigger fires without it…
    let mut usual = Compactor::new(config(false)).unwrap();
    assert!(
        usual
            .turn(Input::evaluate(&history))
            .unwrap()
            .report
            .compacted
    );
    // …and not with it; the agent's call still compacts.
    let mut agent = Compactor::new(config(true)).unwrap();
    assert!(
        !agent
            .turn(Input::evaluate(&history))
            .unwrap()
            .report
            .compacted
    );
    let out = handle_compact_history(&mut agent, &conv).unwrap();
    assert!(agent.count(&out).get() < agent.count(&conv).get() / 2);
    // Nothing else would compact: refused without the tool.
    let err = Config::from_toml("[agent]\nonly_on_request = true").unwrap_err();
    assert!(err.to_string().contains("agent.compact_tool"), "{err}");
}
