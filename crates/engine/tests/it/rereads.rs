//! A session that re-reads what it edits: older copies of a file give way
//! to the newest (`supersede_reads`), with their handles, and a briefing
//! keeps the newest copy of the files it replaced (the working set).

use abridge::model::{Conversation, Message, Role, decode};
use abridge::recall::Handle;
use abridge::{Compactor, Config, PolicyKind};
use serde_json::{Value, json};

/// A file's content at version `v`: a module whose functions grow.
fn file(name: &str, v: usize) -> String {
    let mut out = format!("// {name}, version {v}\n");
    for f in 0..=v {
        out.push_str(&format!(
            "pub fn {name}_step_{f}(input: &str) -> usize {{\n    // step {f} of {name}: count the words of the input\n    input.split_whitespace().count() + {f}\n}}\n\n"
        ));
    }
    out
}

/// Twelve rounds of: read lib, edit it, run the tests; in the first seven,
/// every third round a read of util. Each round re-reads `src/lib.rs`.
fn session() -> Conversation {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Add a step to src/lib.rs each round until the tests pass."}),
    ];
    let mut call = 0;
    let mut exchange = |messages: &mut Vec<Value>, name: &str, args: Value, out: String| {
        call += 1;
        let id = format!("call_{call}");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
    };
    for round in 0..12 {
        exchange(
            &mut messages,
            "read_file",
            json!({"path": "src/lib.rs"}),
            file("lib", round),
        );
        exchange(
            &mut messages,
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "}", "new_string": "}\n"}),
            "The file has been updated.".into(),
        );
        if round % 3 == 0 && round <= 6 {
            exchange(
                &mut messages,
                "read_file",
                json!({"path": "src/util.rs"}),
                file("util", round),
            );
        }
        let outcome = match round {
            11 => "test result: ok. 12 passed".to_owned(),
            _ => format!("exit code 101\ntest lib_step_{round} ... FAILED"),
        };
        exchange(
            &mut messages,
            "shell",
            json!({"command": "cargo test"}),
            outcome,
        );
    }
    let body = json!({"model": "gpt-4o", "messages": messages});
    decode(body.to_string().as_bytes()).unwrap().remove(0)
}

fn config(target: u64, pipeline: &[PolicyKind]) -> Config {
    let mut c = Config::default();
    c.budget.target_tokens = Some(target);
    c.budget.min_iterations = 1;
    c.budget.kept_cap = 0;
    c.policies.pipeline = pipeline.to_vec();
    c
}

fn tokens(conv: &Conversation) -> u64 {
    abridge::tokens::TokenCounter::new(abridge::tokens::TokenizerKind::O200kBase)
        .count_conversation(conv)
        .get()
}

#[test]
fn older_copies_of_a_file_give_way_to_the_newest_and_stay_recallable() {
    let conv = session();
    let before = tokens(&conv);
    // A target that superseding alone can reach.
    let mut c = Compactor::new(config(before * 3 / 5, &[PolicyKind::SupersedeReads])).unwrap();
    let out = c.compact(&conv).unwrap();
    let after = out.conversation.as_ref();
    let run = out
        .report
        .policies
        .iter()
        .find(|r| r.policy == PolicyKind::SupersedeReads)
        .expect("supersede_reads ran");
    assert!(run.items >= 8, "{run:?}");
    assert!(
        run.tokens_saved.get() * 3 >= before,
        "saved {run:?} of {before}"
    );
    let results: Vec<String> = after
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| r.text().into_owned())
        .collect();
    // The newest copy of each file is there as it was; every copy left
    // (in the kept tail) is newer than every copy taken.
    assert!(results.contains(&file("lib", 11)));
    assert!(results.contains(&file("util", 6)));
    let left: Vec<usize> = (0..12)
        .filter(|v| results.contains(&file("lib", *v)))
        .collect();
    assert!(left.len() < 6, "{left:?}");
    assert!(left.windows(2).all(|w| w[1] == w[0] + 1), "{left:?}");
    // Each older copy is one handle away.
    let superseded: Vec<&String> = results
        .iter()
        .filter(|t| t.contains("src/lib.rs is read again later"))
        .collect();
    assert!(!superseded.is_empty());
    for t in superseded {
        let h = Handle::find_all(t).next().expect("a handle");
        let a = c.engine().recall(&json!({"handle": h.as_str()}));
        assert!(
            !a.is_error && a.text().contains("\n// lib, version"),
            "{}",
            a.text()
        );
    }
    // Nothing else was touched: the tests' outcomes are all there.
    let failed = results
        .iter()
        .filter(|t| t.starts_with("exit code 101"))
        .count();
    assert_eq!(failed, 11);
}

#[test]
fn a_briefing_keeps_the_newest_copy_of_the_files_it_replaced() {
    let conv = session();
    let target = tokens(&conv) / 2;
    let mut c = Compactor::new(config(target, &[PolicyKind::Summarize])).unwrap();
    let out = c.compact(&conv).unwrap();
    let after = out.conversation.as_ref();
    let i = out.report.briefing.expect("a briefing");
    let working = after.messages[i + 1].text_content();
    assert_eq!(after.messages[i + 1].role, Role::User);
    assert!(working.starts_with("<working-files>"), "{working}");
    // util.rs was last read in round 6, before the kept tail: its newest
    // copy, not an older one.
    assert!(working.contains("### src/util.rs (as read)"), "{working}");
    assert!(working.contains(file("util", 6).trim_end()), "{working}");
    assert!(!working.contains("// util, version 3"));
    assert!(tokens(after) <= target, "{} > {target}", tokens(after));
    // A later compaction carries it: the working set is replaced, not kept
    // twice, and a file not touched since stays in it.
    let mut longer = after.clone();
    for n in 0..6 {
        longer.messages.push(Message::text(
            Role::Assistant,
            format!("Round {n} done: the step functions count words; next the docs. ").repeat(4),
        ));
        longer.messages.push(Message::text(Role::User, "Go on."));
    }
    assert!(
        tokens(&longer) > target,
        "the longer history needs compacting"
    );
    let again = c.compact(&longer).unwrap();
    let j = again.report.briefing.expect("a second briefing");
    let sets: Vec<String> = again
        .conversation
        .messages
        .iter()
        .map(|m| m.text_content().into_owned())
        .filter(|t| t.starts_with("<working-files>"))
        .collect();
    assert_eq!(sets.len(), 1, "one working set after a chained compaction");
    assert_eq!(again.conversation.messages[j + 1].text_content(), sets[0]);
    assert!(sets[0].contains("### src/util.rs (as read)"), "{}", sets[0]);
}
