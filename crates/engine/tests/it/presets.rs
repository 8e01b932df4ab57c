//! Presets replayed over generated 60-iteration runs, turn by turn as an
//! agent keeps its compacted history: when each compacts, what stays
//! verbatim, how large the briefing is, the events — as the design each
//! reproduces describes it.

use std::sync::{Arc, Mutex};

use abridge::model::{Conversation, Family, Part, Role, iterations, validate};
use abridge::preset::PRESETS;
use abridge::synth::{Spec, run};
use abridge::{Compactor, Config, Event, History};

/// What a replay saw, turn by turn.
struct Replay {
    /// Per turn: tokens sent, and whether that turn compacted.
    turns: Vec<(u64, bool)>,
    events: Vec<Event>,
    /// The history the agent holds at the end.
    last: Conversation,
}

/// Replays `conv` under `config`: a turn before each assistant message,
/// the agent keeping what the turn sent.
fn replay(conv: &Conversation, config: Config) -> Replay {
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut compactor = Compactor::new(config).unwrap();
    let sink = events.clone();
    compactor.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    let head = abridge::model::head_len(&conv.messages);
    let mut start = Conversation::new(conv.family);
    start.messages = conv.messages[..head].to_vec();
    let mut session = History::new(compactor, start);
    let mut turns = Vec::new();
    for m in &conv.messages[head..] {
        if m.role == Role::Assistant {
            let t = session.turn(None).unwrap();
            assert!(validate(session.conversation()).is_empty());
            turns.push((t.tokens.get(), t.compacted()));
        }
        session.push(m.clone());
    }
    let events = events.lock().unwrap().clone();
    Replay {
        turns,
        events,
        last: session.conversation().clone(),
    }
}

fn preset(name: &str) -> Config {
    Config::from_toml(&format!("preset = \"{name}\"")).unwrap()
}

fn sixty(family: Family) -> Conversation {
    run(Spec {
        iterations: 60,
        family,
        ..Spec::default()
    })
}

/// The last `k` iterations of `conv`.
fn tail(conv: &Conversation, k: usize) -> &[abridge::model::Message] {
    let its = iterations(&conv.messages);
    &conv.messages[its[its.len() - k].start..]
}

#[test]
fn every_preset_is_a_valid_config_of_its_own() {
    for p in PRESETS {
        let c = preset(p.name);
        assert_ne!(c, Config::default(), "{}", p.name);
    }
}

#[test]
fn the_config_wins_over_its_preset_key_by_key() {
    let c = Config::from_toml(
        "preset = \"pilo-compaction\"\n[trigger]\nmax_tokens = 90000\n[summary]\nmax_tokens = 3000\n",
    )
    .unwrap();
    assert_eq!(c.trigger.max_tokens, Some(90_000));
    assert_eq!(c.trigger.every_iterations, Some(25));
    assert_eq!(c.summary.max_tokens, 3000);
    assert!(c.summary.skip_on_failure);
    assert_eq!(c.budget.min_iterations, 6);
}

#[test]
fn an_unknown_preset_is_named_with_the_ones_there_are() {
    let e = Config::from_toml("preset = \"pilo\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"pilo\"") && e.contains("pilo-clipping"), "{e}");
}

#[test]
fn pilo_clipping_clips_before_every_step_and_keeps_the_last_three_iterations() {
    for family in [Family::OpenAi, Family::Anthropic] {
        let conv = sixty(family);
        let r = replay(&conv, preset("pilo-clipping"));
        assert_eq!(r.turns.len(), 60);
        // Nothing summarized: clipping only, every call still answered.
        assert!(!r.events.iter().any(|e| matches!(
            e,
            Event::HistoryCompacted {
                summarizer: Some(_),
                ..
            }
        )));
        let calls = |c: &Conversation| {
            c.messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter(|p| matches!(p, Part::ToolCall(_)))
                .count()
        };
        assert_eq!(calls(&r.last), calls(&conv), "{family:?}");
        // The last K = 3 iterations as the agent wrote them.
        assert_eq!(tail(&r.last, 3), tail(&conv, 3), "{family:?}");
        // Older calls keep their tool name only: the text beside them
        // stripped, every argument blanked (the last turn kept three; the
        // iteration after it was added since).
        let its = iterations(&r.last.messages);
        let old = &r.last.messages[..its[its.len() - 4].start];
        let old_calls: Vec<_> = old
            .iter()
            .filter(|m| m.role == Role::Assistant && m.tool_calls().next().is_some())
            .collect();
        assert!(old_calls.len() > 40, "{family:?}");
        for m in &old_calls {
            assert!(
                m.parts.iter().all(|p| p.as_text().is_none()),
                "{family:?}: {m:?}"
            );
            for c in m.tool_calls() {
                let args = c.arguments.to_value();
                let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["_abridged"], "{family:?}: {args}");
            }
        }
        assert!(conv.messages.iter().any(|m| m.role == Role::Assistant
            && m.tool_calls().next().is_some()
            && m.parts.iter().any(|p| p.as_text().is_some())));
        abridge::model::encode(&r.last).unwrap();
        // The history plateaus instead of growing with the run.
        let first_half = r.turns[20..30].iter().map(|t| t.0).max().unwrap();
        let second_half = r.turns[50..60].iter().map(|t| t.0).max().unwrap();
        let whole = replay(&conv, {
            let mut c = Config::default();
            c.trigger.window_fraction = None;
            c
        });
        let grown = whole.turns[59].0;
        assert!(
            second_half * 4 < grown,
            "{family:?}: {second_half} vs {grown}"
        );
        assert!(
            second_half < first_half * 2,
            "{family:?}: {first_half} then {second_half}"
        );
        let compacted = r.turns.iter().filter(|t| t.1).count();
        assert!(
            compacted >= 50,
            "{family:?}: {compacted} of 60 turns clipped"
        );
    }
}

#[test]
fn pilo_compaction_summarizes_every_25_iterations_or_over_40k_and_keeps_six() {
    let conv = sixty(Family::OpenAi);
    let mut config = preset("pilo-compaction");
    // The offline fact sheet as its summarizer (the preset leaves it to the
    // LLM the user configures).
    config.summary.offline = true;
    let r = replay(&conv, config);
    let at: Vec<usize> = r
        .turns
        .iter()
        .enumerate()
        .filter(|(_, t)| t.1)
        .map(|(i, _)| i + 1)
        .collect();
    let reasons: Vec<String> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::HistoryCompacted {
                reason, summarizer, ..
            } => {
                assert_eq!(summarizer.as_deref(), Some("offline"));
                Some(reason.as_str().to_owned())
            }
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), at.len());
    // The first at 25 iterations (the turn before the 26th step), then
    // every 25 more: this run stays under 40,000 tokens in between.
    assert_eq!(at, [26, 51], "{reasons:?}");
    assert!(reasons.iter().all(|r| r == "cadence"), "{reasons:?}");
    assert!(r.turns.iter().all(|t| t.0 <= 40_000), "{:?}", r.turns);
    // The system prompt and the task, one summary in <compacted-history> of
    // at most 2,000 tokens (about 8,000 characters), the last 6 iterations.
    assert_eq!(r.last.messages[..2], conv.messages[..2]);
    let summary = r.last.messages[2].text_content();
    assert!(summary.starts_with("<compacted-history>"), "{summary:.300}");
    assert!(summary.len() < 9_000, "{} characters", summary.len());
    assert_eq!(tail(&r.last, 6), tail(&conv, 6));
    // The six it kept at turn 51, and the ten steps since.
    assert_eq!(iterations(&r.last.messages).len(), 6 + 10);
    // The seed's event fields: the iteration (number and id) and the
    // summary's length.
    let compacted: Vec<(usize, String, Option<usize>)> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::HistoryCompacted {
                iteration,
                iteration_id,
                summary_length,
                ..
            } => Some((*iteration, iteration_id.clone(), *summary_length)),
            _ => None,
        })
        .collect();
    // The newest call of the first `n` iterations.
    let its = iterations(&conv.messages);
    let newest = |n: usize| {
        conv.messages[..its[n - 1].end]
            .iter()
            .flat_map(|m| m.tool_calls())
            .last()
            .map(|c| c.id.clone())
            .unwrap()
    };
    assert_eq!(compacted[0].0, 25);
    assert_eq!(compacted[0].1, newest(25), "the 25th step's call");
    assert_eq!(compacted[1].1, newest(50), "the 50th step's call");
    let briefing = abridge::briefing_in(&r.last, "compacted-history").unwrap();
    assert_eq!(compacted[1].2, Some(briefing.chars().count()));
    let sized = r.events.iter().any(
        |e| matches!(e, Event::HistorySize { iteration_id, .. } if *iteration_id == newest(59)),
    );
    assert!(
        sized,
        "the last turn (before the 60th step) names the 59th step's call"
    );
}

#[test]
fn pilo_compaction_above_40k_tokens_summarizes_before_the_cadence() {
    // Larger pages: the history passes 40,000 tokens before 25 iterations.
    let conv = run(Spec {
        iterations: 60,
        page_lines: 180,
        ..Spec::default()
    });
    let mut config = preset("pilo-compaction");
    config.summary.offline = true;
    let r = replay(&conv, config);
    let first = r.turns.iter().position(|t| t.1).expect("a compaction");
    assert!(first < 25, "first at turn {}", first + 1);
    assert!(r.events.iter().any(
        |e| matches!(e, Event::HistoryCompacted { reason, .. } if reason.as_str() == "tokens")
    ));
    assert!(
        r.turns.iter().all(|t| t.0 <= 40_000 + 12_000),
        "{:?}",
        r.turns
    );
}

#[test]
fn compaction_note_summarizes_above_60k_keeping_ten_messages_and_the_task_list() {
    let conv = run(Spec {
        iterations: 60,
        page_lines: 120,
        ..Spec::default()
    });
    let r = replay(&conv, preset("compaction-note"));
    let first = r.turns.iter().position(|t| t.1).expect("a compaction");
    // Short conversations are unaffected: nothing before 60k tokens.
    assert!(r.turns[..first].iter().all(|t| t.0 <= 60_000));
    assert!(r.turns[first].0 > 60_000 || first > 0 && r.turns[first - 1].0 > 50_000);
    // The summary replaced all but the last iterations: at least 10 messages.
    let kept = tail(&r.last, 5);
    assert!(kept.len() >= 10, "{} messages kept", kept.len());
    assert_eq!(kept, tail(&conv, 5));
    assert!(
        r.turns.iter().all(|t| t.0 <= 60_000 + 8_000),
        "{:?}",
        r.turns
    );
}

#[test]
fn stagewise_triggers_at_65_percent_of_the_window_and_keeps_a_bounded_tail() {
    let conv = run(Spec {
        iterations: 60,
        page_lines: 200,
        ..Spec::default()
    });
    let mut config = preset("stagewise");
    config.model = conv.model.clone();
    let limits = *Compactor::new(config.clone()).unwrap().limits();
    // gpt-4o: 128,000 tokens; 0.65 of it, under the 200k cap.
    assert_eq!(limits.trigger_tokens.map(|t| t.get()), Some(83_200));
    // min(0.2 x window, 40k), and never more than half the target.
    let target = limits.target.unwrap().get();
    assert_eq!(limits.kept_budget.get(), 25_600.min(target / 2));
    let r = replay(&conv, config);
    let first = r.turns.iter().position(|t| t.1).expect("a compaction");
    assert!(r.turns[..first].iter().all(|t| t.0 <= 83_200));
    assert!(
        r.turns.iter().all(|t| t.0 <= 83_200 + 12_000),
        "{:?}",
        r.turns
    );
    // The newest messages as they were.
    assert_eq!(tail(&r.last, 3), tail(&conv, 3));
}

#[test]
fn mycoder_leaves_compaction_to_the_agent_and_tells_it_how_full_it_is() {
    let conv = run(Spec {
        iterations: 60,
        page_lines: 160,
        ..Spec::default()
    });
    // The same run compacts on its own under a 40k-token trigger…
    let trigger = "[trigger]\nmax_tokens = 40000";
    let usual = replay(&conv, Config::from_toml(trigger).unwrap());
    assert!(usual.turns.iter().any(|t| t.1));
    // …and never under mycoder's preset, even with that trigger: the
    // agent decides.
    let mycoder = format!("preset = \"mycoder\"\n{trigger}");
    let r = replay(&conv, Config::from_toml(&mycoder).unwrap());
    assert!(r.turns.iter().all(|t| !t.1), "{:?}", r.turns);
    assert!(r.turns.iter().any(|t| t.0 > 40_000));
    assert_eq!(r.last.messages.len(), conv.messages.len());
    let config = preset("mycoder");
    assert_eq!(config.agent.status_every, 5);
    assert_eq!(config.agent.tool, "compactHistory");
    // The status note: tokens of the window, the tool past 70%.
    let mut c = Compactor::new(config).unwrap();
    let note = c
        .status_message(&conv, Some(1.5))
        .text_content()
        .into_owned();
    assert!(
        note.starts_with("--- STATUS UPDATE ---\nToken Usage: "),
        "{note}"
    );
    assert!(note.contains("Cost So Far: $1.5000"), "{note}");
    assert!(note.contains("'compactHistory' tool"), "{note}");
}

#[test]
fn stagewise_keeps_at_least_ten_messages_in_whole_iterations() {
    let conv = run(Spec {
        iterations: 60,
        page_lines: 200,
        ..Spec::default()
    });
    // Messages of the verbatim tail the compaction reports, found at the
    // end of its output as they were (whole iterations by construction).
    let verbatim = |min_messages: usize| {
        let mut config = preset("stagewise");
        config.model = conv.model.clone();
        config.budget.target_tokens = Some(30_000);
        config.budget.kept_cap = 2_000;
        config.budget.min_messages = min_messages;
        let out = Compactor::new(config).unwrap().compact(&conv).unwrap();
        let its = iterations(&conv.messages);
        let start = its[its.len() - out.report.tail_iterations].start;
        let tail = &conv.messages[start..];
        assert!(out.conversation.messages.ends_with(tail));
        tail.len()
    };
    // The preset's floor: 10 messages, widened to whole iterations…
    assert_eq!(preset("stagewise").budget.min_messages, 10);
    let kept = verbatim(10);
    assert!(kept >= 10, "{kept} messages kept");
    // …where three iterations alone keep fewer.
    assert!(verbatim(0) < 10, "{} messages", verbatim(0));
}
