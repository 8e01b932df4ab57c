//! A thread whose turns name different models: each model keeps the
//! calibration learned from its own reports, and a model counted with
//! another tokenizer counts the carried compaction with its own.

use abridge::model::{Family, Message, Role};
use abridge::synth::{Spec, run};
use abridge::tokens::{Counted, Reported, TokenizerKind};
use abridge::{Config, Engine, Input, Thread};

fn engine(model: &str) -> Engine {
    let mut c = Config {
        model: Some(model.into()),
        ..Config::default()
    };
    c.trigger.window_fraction = None;
    c.trigger.max_tokens = Some(20_000);
    c.budget.clear_at_least = 1_000;
    c.budget.min_iterations = 1;
    Engine::new(c).unwrap()
}

#[test]
fn each_model_keeps_its_own_calibration() {
    let (gpt, claude) = (engine("gpt-4o"), engine("claude-sonnet-4-5"));
    let mut history = run(Spec {
        iterations: 6,
        family: Family::OpenAi,
        ..Spec::default()
    });
    let mut thread = Thread::new(&gpt);
    let sent = thread
        .turn(&gpt, Input::evaluate(&history).resent())
        .unwrap()
        .report
        .tokens_after;
    // The provider counts 30% more than abridge for gpt-4o.
    thread.reported(Reported::new(sent.get() * 13 / 10));
    history.messages.push(Message::text(Role::User, "Go on."));
    thread
        .turn(&gpt, Input::evaluate(&history).resent())
        .unwrap();
    let learned = thread.calibration().factor();
    assert!((learned - 1.3).abs() < 0.01, "gpt-4o learned {learned}");

    // Another model: its report (10% fewer) is its own.
    let report = thread
        .turn(&claude, Input::evaluate(&history).resent())
        .unwrap()
        .report;
    assert_eq!(
        thread.calibration().factor(),
        1.0,
        "a fresh model starts at 1"
    );
    thread.reported(Reported::new(report.tokens_after.get() * 9 / 10));
    history
        .messages
        .push(Message::text(Role::User, "And again."));
    thread
        .turn(&claude, Input::evaluate(&history).resent())
        .unwrap();
    let claude_factor = thread.calibration().factor();
    assert!(
        (claude_factor - 0.9).abs() < 0.01,
        "claude learned {claude_factor}"
    );

    // Back to gpt-4o: its factor comes back, and claude's is kept.
    thread
        .turn(&gpt, Input::evaluate(&history).resent())
        .unwrap();
    assert_eq!(thread.calibration().factor(), learned);
    assert_eq!(thread.state().model.as_deref(), Some("gpt-4o"));
    let kept = thread.state().calibrations["claude-sonnet-4-5"].factor();
    assert_eq!(kept, claude_factor);
    // Stored and resumed, the thread still knows both.
    let state = abridge::ThreadState::from_json(&thread.state().to_json().unwrap()).unwrap();
    assert_eq!(
        state.calibrations["claude-sonnet-4-5"].factor(),
        claude_factor
    );
}

/// A compaction carried from a model counted with `o200k_base` is counted
/// again with Claude's estimate when the next turn names Claude: the
/// history's size is Claude's count of what goes out, as a new thread
/// would count it, and over Claude's trigger it is compacted.
#[test]
fn a_carried_compaction_is_counted_with_the_new_models_tokenizer() {
    let (gpt, claude) = (engine("gpt-4o"), engine("claude-sonnet-4-5"));
    assert_eq!(gpt.limits().tokenizer, TokenizerKind::O200kBase);
    assert_eq!(claude.limits().tokenizer, TokenizerKind::ClaudeCalibrated);
    let mut history = run(Spec {
        iterations: 40,
        family: Family::OpenAi,
        ..Spec::default()
    });
    let mut thread = Thread::new(&gpt);
    let first = thread
        .turn(&gpt, Input::evaluate(&history).resent())
        .unwrap();
    assert!(first.report.compacted, "over gpt-4o's trigger");
    history.messages.push(Message::text(Role::User, "Go on."));
    let next = thread
        .turn(&claude, Input::evaluate(&history).resent())
        .unwrap();
    let claude_count = Thread::new(&claude).count(&next.conversation);
    assert_eq!(next.report.tokens_after, claude_count);
    // Counted with o200k_base the carried prefix looks under the trigger.
    assert!(next.report.compacted && claude_count <= Counted::new(20_000));
}
