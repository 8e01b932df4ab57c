//! Triggers, convergence and events over a whole run, turn by turn.

use abridge::tokens::Reported;
use std::sync::{Arc, Mutex};

use abridge::model::validate;
use abridge::model::{Conversation, Family, Part, Role};
use abridge::synth::{Spec, run};
use abridge::{Compactor, Config, Event, History, Rung};

use crate::support::message_and_tool_tokens;

type Events = Arc<Mutex<Vec<Event>>>;

/// A session over the head of `conv`, recording every event.
fn session(conv: &Conversation, config: Config) -> (History, Events) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut compactor = Compactor::new(config).unwrap();
    let sink = events.clone();
    compactor.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    let head = abridge::model::head_len(&conv.messages);
    let mut start = Conversation::new(conv.family);
    start.messages = conv.messages[..head].to_vec();
    (History::new(compactor, start), events)
}

fn replay(conv: &Conversation, config: Config) -> (Vec<u64>, Vec<bool>, Vec<Event>) {
    let (mut session, events) = session(conv, config);
    let head = abridge::model::head_len(&conv.messages);
    let (mut tokens, mut compacted) = (Vec::new(), Vec::new());
    for m in &conv.messages[head..] {
        // A turn is evaluated when the agent is about to call the model:
        // before each assistant message.
        if m.role == Role::Assistant {
            let t = session.turn(None).unwrap();
            tokens.push(t.tokens.get());
            compacted.push(t.compacted());
        }
        session.push(m.clone());
    }
    let events = events.lock().unwrap().clone();
    (tokens, compacted, events)
}

#[test]
fn a_100_iteration_run_plateaus_without_back_to_back_compactions() {
    for family in [Family::OpenAi, Family::Anthropic] {
        let conv = run(Spec {
            family,
            ..Spec::default()
        });
        let mut cfg = Config::default();
        cfg.trigger.max_tokens = Some(30_000);
        let (tokens, compacted, events) = replay(&conv, cfg);
        assert_eq!(tokens.len(), 100);
        let compactions = compacted.iter().filter(|c| **c).count();
        assert!(compactions >= 2, "{family:?}: {compactions}");
        assert!(
            !compacted.windows(2).any(|w| w[0] && w[1]),
            "compacted on consecutive turns"
        );
        // Bounded: never far above the trigger (one turn's growth at most).
        let peak = *tokens.iter().max().unwrap();
        assert!(peak < 36_000, "{family:?}: peak {peak}");
        // And not growing: the second half is no higher than the first half's peak.
        let first_half = tokens[..50].iter().max().unwrap();
        let second_half = tokens[50..].iter().max().unwrap();
        assert!(
            second_half <= &(first_half + 6_000),
            "{family:?}: {first_half} then {second_half}"
        );
        let sizes = events
            .iter()
            .filter(|e| matches!(e, Event::HistorySize { .. }))
            .count();
        let done = events
            .iter()
            .filter(|e| matches!(e, Event::HistoryCompacted { .. }))
            .count();
        assert_eq!(sizes, 100);
        assert_eq!(done, compactions);
    }
}

#[test]
fn cadence_trigger_respects_clear_at_least() {
    let conv = run(Spec {
        iterations: 30,
        ..Spec::default()
    });
    let mut cfg = Config::default();
    cfg.trigger.every_iterations = Some(5);
    cfg.budget.kept_cap = 1_000;
    cfg.budget.clear_at_least = 1_000_000;
    let (_, compacted, events) = replay(&conv, cfg.clone());
    assert!(compacted.iter().all(|c| !c));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::CompactionSkipped { .. }))
    );
    // With a reachable clear_at_least, the cadence clips every 5 iterations.
    cfg.budget.clear_at_least = 500;
    let (_, compacted, _) = replay(&conv, cfg);
    let at: Vec<usize> = compacted
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .map(|(i, _)| i)
        .collect();
    assert!(at.len() >= 3, "{at:?}");
    assert!(at.windows(2).all(|w| w[1] - w[0] >= 5), "{at:?}");
}

#[test]
fn cannot_shrink_names_the_floor_and_carries_the_smallest_history() {
    let conv = run(Spec {
        iterations: 6,
        ..Spec::default()
    });
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(10);
    cfg.budget.min_iterations = 3;
    let mut c = Compactor::new(cfg).unwrap();
    let before = c.count(&conv).get();
    let err = c.compact(&conv).unwrap_err();
    let abridge::Error::CannotShrink {
        floor,
        target,
        tail_iterations,
        smallest,
        ..
    } = err
    else {
        panic!("{err}")
    };
    // The ladder went down to the newest iteration before giving up.
    assert_eq!((target.get(), tail_iterations), (10, 1));
    assert!(floor.get() > 10);
    let smallest = smallest.expect("the floor as a history");
    assert!(validate(&smallest).is_empty());
    let after = c.count(&smallest).get();
    assert!(after < before / 2, "{after} of {before}");
    assert_eq!(after, floor.get());
}

/// A tail of `min_iterations` is a preference: when head, tools and that
/// tail are over the target, fewer iterations are kept, then the kept ones
/// are clipped, then the newest results are cut — each step reported.
#[test]
fn the_floor_ladder_degrades_step_by_step() {
    let conv = run(Spec {
        iterations: 8,
        ..Spec::default()
    });
    let mut cfg = Config::default();
    cfg.budget.min_iterations = 3;
    let mut c = Compactor::new(cfg.clone()).unwrap();
    let its = conv.iterations();
    let (tokens, tools) = message_and_tool_tokens(&mut c, &conv);
    let last3: u64 = its[its.len() - 3..]
        .iter()
        .flat_map(|i| &tokens[i.range()])
        .sum();
    let head: u64 = tokens[..conv.head_len()].iter().sum();
    // Under head + tools + three iterations, over head + tools + one.
    let newest: u64 = tokens[its[its.len() - 1].range()].iter().sum();
    for target in [head + tools + last3 - 1, head + tools + newest / 2] {
        cfg.budget.target_tokens = Some(target);
        let out = Compactor::new(cfg.clone()).unwrap().compact(&conv).unwrap();
        assert!(
            out.report.tokens_after.get() <= target,
            "{} > {target}",
            out.report.tokens_after
        );
        assert!(validate(&out.conversation).is_empty());
        let rungs: Vec<Rung> = out.report.degraded.iter().map(|d| d.rung).collect();
        assert_eq!(rungs[0], Rung::FewerIterations, "{rungs:?}");
        assert!(
            out.report
                .events
                .iter()
                .any(|e| matches!(e, Event::Degraded(_)))
        );
        if target < head + tools + newest {
            assert_eq!(rungs.last(), Some(&Rung::NewestResultsCut), "{rungs:?}");
            let last = out.conversation.messages.last().unwrap();
            let cut = last.tool_results().next().unwrap().text();
            assert!(
                cut.contains("cut to fit the context window")
                    || cut.contains("excerpt of a tool result")
                    || cut.contains("clipped"),
                "{cut}"
            );
            // What the steps left of the room held for them goes back to
            // the results cut.
            let after = out.report.tokens_after.get();
            assert!(after * 10 >= target * 9, "{after} of {target}");
        }
    }
}

/// Compacts `conv` to what its head, newest iteration and tools take
/// plus `extra`, keeping one iteration at least: the history fits and
/// stays valid, a briefing is written and the newest results were cut for
/// it, and nothing else of the ladder was taken. The briefing's tokens.
fn brief_beside_newest(conv: &Conversation, extra: u64) -> u64 {
    let mut cfg = Config::default();
    cfg.budget.min_iterations = 1;
    let mut c = Compactor::new(cfg.clone()).unwrap();
    let (tokens, tools) = message_and_tool_tokens(&mut c, conv);
    let newest = conv.iterations().last().unwrap().range();
    let kept =
        tokens[..conv.head_len()].iter().sum::<u64>() + tokens[newest].iter().sum::<u64>() + tools;
    let target = kept + extra;
    cfg.budget.target_tokens = Some(target);
    let out = Compactor::new(cfg.clone()).unwrap().compact(conv).unwrap();
    assert!(out.report.tokens_after.get() <= target);
    assert!(validate(&out.conversation).is_empty());
    let briefing = out
        .report
        .briefing_text(&out.conversation, &cfg.summary.wrapper);
    assert!(
        briefing.is_some(),
        "{extra}: {:#?}",
        out.conversation.messages
    );
    let rungs: Vec<Rung> = out.report.degraded.iter().map(|d| d.rung).collect();
    assert_eq!(rungs, [Rung::NewestResultsCut], "{extra}");
    let at = out.report.briefing.expect("the briefing's place");
    c.message_tokens(&out.conversation.messages[at..=at])[0].get()
}

/// When the newest iteration alone leaves a briefing too little room, the
/// old region is neither dropped without one nor briefed in a few dozen
/// tokens: the newest results are cut to make the room the ladder's last
/// rung holds (they stay recallable), at every budget alike.
#[test]
fn a_briefing_is_not_given_up_for_the_newest_results() {
    let conv = run(Spec {
        iterations: 8,
        ..Spec::default()
    });
    // Beside the newest iteration, room for no briefing, then for a small one.
    for extra in [40, 150] {
        let tokens = brief_beside_newest(&conv, extra);
        assert!(tokens > extra, "{extra}: a briefing of {tokens}");
    }
}

/// The newest result holds less than the room the ladder's last rung
/// holds for a briefing, but enough for one: it is cut for it all the
/// same, as that rung does at a smaller target, rather than kept whole
/// while the old region is dropped without a briefing.
#[test]
fn a_briefing_takes_what_short_newest_results_can_give() {
    let mut conv = run(Spec {
        iterations: 8,
        ..Spec::default()
    });
    let newest = conv.iterations().last().unwrap().range();
    let results = conv.messages[newest]
        .iter_mut()
        .flat_map(|m| m.parts.iter_mut())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r),
            _ => None,
        });
    // One result a little over what can be cut; any others too short to.
    for (i, r) in results.enumerate() {
        r.replace_with_text(match i {
            0 => "row 17: sku C17-0042 price 19.99 stock 3\n".repeat(11),
            _ => "ok".to_owned(),
        });
    }
    brief_beside_newest(&conv, 40);
}

/// The provider counts 1.5× what abridge does: after the first response
/// reports usage, triggers and targets work in the provider's units, so the
/// prompt the provider sees stays under the trigger although abridge's own
/// count would have let it through.
#[test]
fn reported_usage_calibrates_triggers_and_targets() {
    const PROVIDER: f64 = 1.5;
    let conv = run(Spec {
        iterations: 80,
        page_lines: 20,
        ..Spec::default()
    });
    let mut cfg = Config::default();
    cfg.trigger.window_fraction = None;
    cfg.trigger.max_tokens = Some(30_000);
    cfg.budget.min_iterations = 2;
    let (mut session, events) = session(&conv, cfg);
    let head = abridge::model::head_len(&conv.messages);
    let mut reported = None;
    let mut compactions = 0;
    for m in &conv.messages[head..] {
        if m.role == Role::Assistant {
            let t = session.turn(reported.map(Reported::new)).unwrap();
            compactions += usize::from(t.compacted());
            // What the provider reports for the prompt just sent.
            let seen = (t.tokens.get() as f64 * PROVIDER) as u64;
            if reported.is_some() {
                assert!(seen <= 30_000 + 2_000, "provider saw {seen}");
            }
            reported = Some(seen);
        }
        session.push(m.clone());
    }
    assert!(compactions >= 2);
    let factor = session.compactor_mut().calibration().factor();
    assert!((factor - PROVIDER).abs() < 0.01, "{factor}");
    let events = events.lock().unwrap();
    let last = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::HistorySize {
                tokens,
                calibrated_tokens,
                ..
            } => Some((*tokens, *calibrated_tokens)),
            _ => None,
        })
        .unwrap();
    assert_eq!(last.1.get(), (last.0.get() as f64 * factor).ceil() as u64);
}

/// A cadence compaction (no target, so what it clears does not depend on
/// the calibration) on a thread whose provider counts `factor` × abridge's
/// count: whether it compacted, and what it cleared in abridge's count.
fn cadence_once(conv: &Conversation, clear_at_least: u64, factor: u64) -> (bool, u64) {
    let mut cfg = Config::default();
    cfg.trigger.every_iterations = Some(5);
    cfg.budget.kept_cap = 1_000;
    cfg.budget.clear_at_least = clear_at_least;
    let engine = abridge::Engine::new(cfg).unwrap();
    let mut thread = abridge::Thread::new(&engine);
    let mut calibration = abridge::Calibration::default();
    calibration.observe(
        abridge::tokens::Counted::new(10_000),
        Reported::new(10_000 * factor),
    );
    thread.set_calibration(calibration);
    let report = thread
        .turn(&engine, abridge::Input::evaluate(conv))
        .unwrap()
        .report;
    let saved = report.tokens_before.get() - report.tokens_after.get();
    (report.compacted, saved)
}

#[test]
fn clear_at_least_is_in_the_providers_units_like_the_trigger() {
    let conv = run(Spec {
        iterations: 30,
        ..Spec::default()
    });
    let (compacted, saved) = cadence_once(&conv, 0, 1);
    assert!(compacted && saved > 1_000, "{saved}");
    // Half again what it clears as abridge counts: skipped where the
    // provider counts the same, kept where it counts twice as much.
    let minimum = saved * 3 / 2;
    assert!(!cadence_once(&conv, minimum, 1).0);
    assert_eq!(
        cadence_once(&conv, minimum, 2),
        (true, saved),
        "the provider would see 2 × {saved} tokens cleared, over {minimum}"
    );
}

/// A trigger under twice `clear_at_least` (2,000 by default) still
/// compacts: what a compaction must clear is at most half the trigger, and
/// the target under it, not a target of nothing.
#[test]
fn a_small_trigger_still_compacts() {
    let conv = run(Spec {
        iterations: 30,
        ..Spec::default()
    });
    let mut cfg = Config::default();
    cfg.trigger.max_tokens = Some(3_000);
    cfg.budget.min_iterations = 1;
    let engine = abridge::Engine::new(cfg).unwrap();
    let mut thread = abridge::Thread::new(&engine);
    let report = thread
        .turn(&engine, abridge::Input::evaluate(&conv))
        .unwrap()
        .report;
    assert!(report.tokens_before.get() > 3_000);
    assert!(report.compacted, "{report:?}");
    assert!(
        report.tokens_after.get() <= 1_500,
        "{}",
        report.tokens_after.get()
    );
}

/// A system prompt over the trigger (a small window): in an agent's own
/// loop, as through a proxy, each compaction leaves the smallest valid
/// history it reached, its report saying the target it missed. The
/// history used to stay whole, the turn fail, and the agent send it all.
#[test]
fn a_turn_over_its_target_even_at_the_floor_leaves_the_floor() {
    let mut conv = run(Spec {
        iterations: 30,
        ..Spec::default()
    });
    assert_eq!(conv.messages[0].role, Role::System);
    conv.messages[0].parts = vec![Part::text("Follow the rules. ".repeat(2000))];
    let toml = "[trigger]\nmax_tokens = 6000\n[budget]\nmin_iterations = 1";
    let (mut session, _) = session(&conv, Config::from_toml(toml).unwrap());
    let head = abridge::model::head_len(&conv.messages);
    let head_tokens = Compactor::new(Config::default())
        .unwrap()
        .count(&Conversation {
            messages: conv.messages[..head].to_vec(),
            ..conv.clone_envelope()
        })
        .get();
    assert!(head_tokens > 6000, "{head_tokens}");
    let (mut reports, mut untouched, mut sent) = (Vec::new(), 0, None);
    for m in &conv.messages[head..] {
        if m.role == Role::Assistant {
            // The provider reports what the last turn sent, counted as
            // abridge counts it: the calibration must learn nothing from
            // the floor going instead of the whole.
            let turned = session.turn(sent.take());
            sent = Some(Reported::new(session.tokens().get()));
            match turned {
                Ok(t) => reports.extend(t.report.filter(|r| r.compacted)),
                // Nothing to shrink yet: the history goes as it is.
                Err(abridge::Error::CannotShrink { smallest: None, .. }) => untouched += 1,
                Err(e) => panic!("{e}"),
            }
        }
        session.push(m.clone());
    }
    assert!(untouched <= 1, "{untouched} turns left whole");
    assert!(reports.len() > 10, "{} compactions", reports.len());
    for r in &reports {
        assert!(r.tokens_after < r.tokens_before, "{r:?}");
        assert!(r.tokens_after > r.target.unwrap());
        assert!(r.tokens_after.get() < head_tokens + 2000, "{r:?}");
        let f = r.calibration.factor();
        assert!(
            (0.95..=1.05).contains(&f),
            "calibration learnt {f} from the floor"
        );
    }
    assert!(validate(session.conversation()).is_empty());
}
