//! What the agent wrote down stays as it wrote it on the LLM path: its task
//! list in every shape agents use, with each item's status, and the ids of
//! what it created, whatever the LLM's briefing kept.

use abridge::Compactor;
use abridge::model::{Arguments, ContentForm, Conversation, Family, Message, Part, Role};
use abridge::model::{ToolCall, ToolResult};
use abridge_testkit::{Mock, openai_ok};
use serde_json::{Value, json};

use crate::providers::{briefing_of, compact, openai};

const UUID: &str = "3f2b8c1e-9a4d-4e6f-b1a2-7c8d9e0f1a2b";

/// Appends a call of `name` with `args` and its result.
fn step(conv: &mut Conversation, name: &str, args: Value, result: &str) {
    let id = format!("call_{}", conv.messages.len());
    conv.messages.push(Message {
        role: Role::Assistant,
        form: ContentForm::Null,
        parts: vec![Part::ToolCall(Box::new(ToolCall {
            id: id.clone(),
            name: name.into(),
            arguments: Arguments::Json(args.to_string()),
            extra: [("type".to_owned(), json!("function"))]
                .into_iter()
                .collect(),
            function_extra: Default::default(),
        }))],
        ..Message::default()
    });
    conv.messages.push(Message {
        role: Role::Tool,
        parts: vec![Part::ToolResult(Box::new(ToolResult {
            call_id: id,
            parts: vec![Part::text(result)],
            form: ContentForm::Text,
            is_error: None,
            extra: Default::default(),
        }))],
        form: ContentForm::Absent,
        ..Message::default()
    });
}

/// A call of a tool, its arguments and its result.
type Call = (&'static str, Value, &'static str);

/// A session that creates a ticket, writes its task list with `calls`, then
/// works on for a while (`later`: a task-list call among the newest steps).
fn session(calls: &[Call], later: Option<&Call>) -> Conversation {
    let mut conv = Conversation::new(Family::OpenAi);
    conv.model = Some("gpt-4o".into());
    conv.messages
        .push(Message::text(Role::System, "You are a support agent."));
    conv.messages.push(Message::text(
        Role::User,
        "File a ticket for the checkout failure and work through the plan.",
    ));
    let ticket = json!({"id": UUID, "title": "Checkout fails", "owner_id": "u-7"});
    step(
        &mut conv,
        "create_entity",
        json!({"type": "ticket", "title": "Checkout fails"}),
        &ticket.to_string(),
    );
    for (tool, args, result) in calls {
        step(&mut conv, tool, args.clone(), result);
    }
    for i in 0..8 {
        let log = format!("checkout log line {i}\n").repeat(if i < 6 { 60 } else { 2 });
        let cmd = format!("grep checkout logs/{i}.log");
        step(&mut conv, "shell", json!({ "command": cmd }), &log);
    }
    if let Some((tool, args, result)) = later {
        step(&mut conv, tool, args.clone(), result);
    }
    conv
}

const ITEMS: [&str; 3] = [
    "Reproduce the checkout failure",
    "Patch the cart total rounding",
    "Email the customer",
];

/// Every shape, each with a done, an in-progress and a pending item, and
/// how it writes "in progress".
fn shapes() -> Vec<(&'static str, Vec<Call>, &'static str)> {
    vec![
        (
            "TodoWrite",
            vec![(
                "TodoWrite",
                json!({"todos": [
                {"content": ITEMS[0], "status": "completed", "activeForm": "Reproducing"},
                {"content": ITEMS[1], "status": "in_progress", "activeForm": "Patching"},
                {"content": ITEMS[2], "status": "pending", "activeForm": "Emailing"}]}),
                "ok",
            )],
            "in_progress",
        ),
        (
            "update_plan",
            vec![(
                "update_plan",
                json!({"explanation": "after the repro", "plan": [
                {"step": ITEMS[0], "status": "completed"},
                {"step": ITEMS[1], "status": "in_progress"},
                {"step": ITEMS[2], "status": "pending"}]}),
                "Plan updated",
            )],
            "in_progress",
        ),
        (
            "reportProgress",
            vec![(
                "reportProgress",
                json!({"tasks": [
                {"title": ITEMS[0], "done": true},
                {"title": ITEMS[1], "status": "in progress"},
                {"title": ITEMS[2], "done": false}]}),
                "ok",
            )],
            "in progress",
        ),
        (
            "TaskCreate",
            vec![
                (
                    "TaskCreate",
                    json!({"subject": ITEMS[0], "activeForm": "Reproducing"}),
                    "Task #1 created successfully: Reproduce the checkout failure",
                ),
                (
                    "TaskCreate",
                    json!({"subject": ITEMS[1], "activeForm": "Patching"}),
                    "Task #2 created successfully: Patch the cart total rounding",
                ),
                (
                    "TaskCreate",
                    json!({"subject": ITEMS[2], "activeForm": "Emailing"}),
                    "Task #3 created successfully: Email the customer",
                ),
                (
                    "TaskUpdate",
                    json!({"taskId": "1", "status": "completed"}),
                    "Updated task #1 status",
                ),
                (
                    "TaskUpdate",
                    json!({"taskId": "2", "status": "in_progress"}),
                    "Updated task #2 status",
                ),
            ],
            "in_progress",
        ),
    ]
}

/// The task-list line of `text` that names `item`.
fn line_of<'t>(text: &'t str, item: &str) -> &'t str {
    text.lines()
        .rfind(|l| l.starts_with("- [") && l.contains(item))
        .unwrap_or_default()
}

#[test]
fn the_summarizer_reads_every_shape_of_task_list_with_its_statuses() {
    for (shape, calls, in_progress) in shapes() {
        // A briefing that calls everything done and forgets the ticket.
        let sloppy = "## Progress\n- Reproduce the checkout failure: done.\n- Patch the cart total rounding: done.\n- Email the customer: done.";
        let mock = Mock::start(vec![openai_ok(sloppy)]);
        let (after, report, _, _) = compact(&session(&calls, None), openai(&mock));
        assert_eq!(
            report.summarizer.as_deref(),
            Some("openai:test-model"),
            "{shape}: {report:?}"
        );
        // What the summarizer was shown: the list as it stands, each item
        // with its status.
        let req = &mock.requests()[0];
        let user = req.body["messages"][1]["content"].as_str().unwrap();
        let list = user
            .split_once("<task-list>\n")
            .and_then(|(_, rest)| rest.split_once("</task-list>"))
            .map(|(list, _)| list)
            .unwrap_or_else(|| panic!("{shape}: no task list in {user}"));
        assert_eq!(list.lines().count(), 3, "{shape}: {list}");
        for (item, status) in ITEMS.iter().zip(["completed", in_progress, "pending"]) {
            let line = line_of(list, item);
            assert!(
                line.starts_with(&format!("- [{status}] ")),
                "{shape}: {list}"
            );
        }
        assert!(
            user.contains(UUID),
            "{shape}: the created id is in the history shown"
        );
        // What the agent gets: the statuses restored, the claims flagged,
        // the created id named.
        let b = briefing_of(&after);
        let v = report.attempts[0].verification().unwrap();
        assert_eq!(v.restated_tasks.len(), 3, "{shape}: {v:?}");
        assert!(
            b.contains("## Task list (as the agent last set it here, with its statuses)"),
            "{b}"
        );
        assert!(
            line_of(&b, ITEMS[1]).starts_with(&format!("- [{in_progress}] ")),
            "{b}"
        );
        assert!(
            v.unverified_claims.iter().any(|c| c.contains(ITEMS[2])),
            "{v:?}"
        );
        assert!(b.contains(UUID), "{shape}: {b}");
    }
}

#[test]
fn a_briefing_that_states_the_list_as_the_agent_did_is_left_alone() {
    let (_, calls, _) = shapes().remove(0);
    let faithful = format!(
        "## Task list\n- [x] Reproduce the checkout failure\n- [ ] Patch the cart total rounding (in progress)\n- [ ] Email the customer (pending)\n\n## Created\n- ticket {UUID}"
    );
    let mock = Mock::start(vec![openai_ok(&faithful)]);
    let (after, report, _, _) = compact(&session(&calls, None), openai(&mock));
    let v = report.attempts[0].verification().unwrap();
    assert!(v.restated_tasks.is_empty(), "{v:?}");
    assert!(v.unverified_claims.is_empty(), "{v:?}");
    assert!(!briefing_of(&after).contains("with its statuses"));
}

#[test]
fn a_list_written_again_in_the_kept_steps_is_not_restated_from_the_older_one() {
    let (_, calls, _) = shapes().remove(0);
    let newer: Call = (
        "TodoWrite",
        json!({"todos": ITEMS.map(|i| json!({"content": i, "status": "completed"}))}),
        "ok",
    );
    // The briefing follows the newer list, which the model reads verbatim.
    let current = "## Progress\n- Reproduce the checkout failure: done.\n- Patch the cart total rounding: done.\n- Email the customer: done.";
    let mock = Mock::start(vec![openai_ok(current)]);
    let (after, report, _, _) = compact(&session(&calls, Some(&newer)), openai(&mock));
    let v = report.attempts[0].verification().unwrap();
    assert!(v.restated_tasks.is_empty(), "{v:?}");
    assert!(v.unverified_claims.is_empty(), "{v:?}");
    // The newer list is there, whole.
    let kept = after
        .messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .any(|c| c.name == "TodoWrite" && !c.arguments.to_json_text().contains("in_progress"));
    assert!(kept);
}

#[test]
fn the_offline_briefing_keeps_the_list_and_the_created_id() {
    for (shape, calls, in_progress) in shapes() {
        let conv = session(&calls, None);
        let mut cfg = abridge::Config {
            model: conv.model.clone(),
            ..abridge::Config::default()
        };
        let total = Compactor::new(cfg.clone()).unwrap().count(&conv).get();
        cfg.policies.pipeline = vec![abridge::PolicyKind::Summarize];
        cfg.budget.target_tokens = Some(total / 3);
        cfg.budget.min_iterations = 2;
        let out = Compactor::new(cfg).unwrap().compact(&conv).unwrap();
        let b = briefing_of(&out.conversation);
        assert!(b.contains("## Created"), "{shape}: {b}");
        assert!(
            b.contains(&format!("create_entity `ticket` → {UUID}")),
            "{shape}: {b}"
        );
        for (item, status) in ITEMS.iter().zip(["completed", in_progress, "pending"]) {
            assert!(
                line_of(&b, item).starts_with(&format!("- [{status}] ")),
                "{shape}: {b}"
            );
        }
    }
}
