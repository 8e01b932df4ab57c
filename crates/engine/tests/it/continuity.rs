//! History continuity over random histories, random growth and random
//! edits: a carried compaction is re-sent byte-identical with only the new
//! messages appended and counted correctly; a history that diverged is
//! compacted afresh, exactly as if nothing had been carried.

use abridge::model::{Conversation, Part, iterations, validate};
use abridge::synth::{Spec, run};
use abridge::{Compactor, Config, Input, PrefixKey};
use proptest::prelude::*;

fn config(trigger: u64) -> Config {
    let mut c = Config::default();
    c.trigger.window_fraction = None;
    c.trigger.max_tokens = Some(trigger);
    c.budget.clear_at_least = trigger / 10;
    c.budget.min_iterations = 1;
    c
}

/// The history as it stood before iteration `k` (all of it past the end).
fn prefix(full: &Conversation, k: usize) -> Conversation {
    let its = iterations(&full.messages);
    let end = its.get(k).map_or(full.messages.len(), |i| i.start);
    Conversation {
        messages: full.messages[..end].to_vec(),
        ..full.clone_envelope()
    }
}

/// Changes the text of message `i` (its first text part, or adds one).
fn edit(conv: &mut Conversation, i: usize) {
    let m = &mut conv.messages[i];
    match m.parts.iter_mut().find_map(|p| match p {
        Part::Text(t) => Some(t),
        _ => None,
    }) {
        Some(t) => t.text.push_str(" (edited)"),
        None => m.parts.push(Part::text("(edited)")),
    }
}

/// Two turns that must agree: the same messages, counts and compaction, or
/// the same error.
fn same_turn(
    x: abridge::Result<abridge::Outcome<'_>>,
    y: abridge::Result<abridge::Outcome<'_>>,
) -> Result<(), TestCaseError> {
    match (x, y) {
        (Ok(x), Ok(y)) => {
            prop_assert_eq!(&x.conversation.messages, &y.conversation.messages);
            prop_assert_eq!(x.report.tokens_before, y.report.tokens_before);
            prop_assert_eq!(x.report.tokens_after, y.report.tokens_after);
            prop_assert_eq!(x.report.compacted, y.report.compacted);
        }
        (Err(x), Err(y)) => prop_assert_eq!(x.to_string(), y.to_string()),
        (x, y) => prop_assert!(
            false,
            "{:?} vs {:?}",
            x.map(|o| o.report),
            y.map(|o| o.report)
        ),
    }
    Ok(())
}

fn spec() -> impl Strategy<Value = Spec> {
    crate::support::specs(12..40, 4..16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Growth only: between compactions, what is sent starts with the
    /// carried prefix byte for byte, ends with the new messages, and is
    /// counted as a fresh count of it would be.
    #[test]
    fn growth_resends_the_carried_prefix(spec in spec(), steps in prop::collection::vec(1usize..4, 1..30)) {
        let full = run(spec);
        let total = Compactor::new(Config::default()).unwrap().count(&full).get();
        let mut compactor = Compactor::new(config(total / 3 + 2_000)).unwrap();
        let mut counter = Compactor::new(config(total / 3 + 2_000)).unwrap();
        let mut k = 1;
        for step in steps {
            k += step;
            let history = prefix(&full, k);
            let carried = compactor.thread().carryover().cloned();
            // A history whose floor is over the target cannot shrink: the
            // caller sends it as it is, and the carryover stays.
            let Ok(out) = compactor.turn(Input::evaluate(&history).resent()) else {
                prop_assert_eq!(compactor.thread().carryover(), carried.as_ref());
                continue;
            };
            let sent = out.conversation.into_owned();
            prop_assert!(validate(&sent).is_empty(), "{:?}", validate(&sent));
            let fresh = counter.count(&sent).get();
            prop_assert_eq!(out.report.tokens_after.get(), fresh);
            match carried {
                Some(c) if !out.report.compacted => {
                    prop_assert!(c.applies_to(&history));
                    prop_assert_eq!(&sent.messages[..c.messages().len()], c.messages());
                    prop_assert_eq!(
                        &sent.messages[c.messages().len()..],
                        &history.messages[c.source().len..]
                    );
                    prop_assert_eq!(out.report.tokens_before.get(), fresh, "carried tokens plus new ones");
                }
                _ => {}
            }
            if out.report.compacted {
                let c = compactor.thread().carryover().unwrap();
                prop_assert_eq!(c.messages(), &sent.messages[..]);
                prop_assert_eq!(c.source().len, history.messages.len());
            }
        }
    }

    /// A caller that knows the history only grew (`extending`) gets
    /// exactly what a full `turn` gives — messages, counts, compactions —
    /// turn after turn.
    #[test]
    fn turn_appended_matches_turn(spec in spec(), steps in prop::collection::vec(1usize..4, 1..30)) {
        let full = run(spec);
        let total = Compactor::new(Config::default()).unwrap().count(&full).get();
        let cfg = config(total / 3 + 2_000);
        let (mut a, mut b) = (Compactor::new(cfg.clone()).unwrap(), Compactor::new(cfg).unwrap());
        let mut k = 1;
        let mut before = 0;
        for step in steps {
            k += step;
            let history = prefix(&full, k);
            let x = a.turn(Input::evaluate(&history).resent());
            let y = b.turn(Input::evaluate(&history).resent().extending(before));
            same_turn(x, y)?;
            prop_assert_eq!(a.thread().carryover(), b.thread().carryover());
            before = history.messages.len();
        }
    }

    /// A caller that keeps only what the carried compaction does not cover
    /// (`after`: the prefix left out, named by its key) gets exactly what a
    /// caller of whole histories gets, with or without `extending`; a turn
    /// that leaves out what nothing carried covers fails and changes nothing.
    #[test]
    fn a_history_left_out_where_carried_matches_the_whole(
        spec in spec(),
        steps in prop::collection::vec((1usize..4, any::<prop::sample::Index>(), any::<bool>()), 1..30),
    ) {
        let full = run(spec);
        let total = Compactor::new(Config::default()).unwrap().count(&full).get();
        let cfg = config(total / 3 + 2_000);
        let (mut a, mut b) = (Compactor::new(cfg.clone()).unwrap(), Compactor::new(cfg).unwrap());
        let mut k = 1;
        let mut before = 0;
        for (step, cut, extending) in steps {
            k += step;
            let history = prefix(&full, k);
            // Left out: up to the carried compaction's source, at most.
            let covered = b.thread().carryover().map_or(0, |c| c.source().len);
            let left = cut.index(covered + 1);
            let key = PrefixKey::of(&history.messages[..left]);
            let held = Conversation {
                messages: history.messages[left..].to_vec(),
                ..history.clone_envelope()
            };
            let mut input = Input::evaluate(&held).resent().after(key);
            if extending {
                input = input.extending(before);
            }
            prop_assert!(b.thread().takes(&input));
            let x = a.turn(Input::evaluate(&history).resent());
            let y = b.turn(input);
            same_turn(x, y)?;
            prop_assert_eq!(a.thread().carryover(), b.thread().carryover());
            before = history.messages.len();
        }
        // More left out than is carried: refused, and nothing changes.
        let history = prefix(&full, k + 1);
        let covered = b.thread().carryover().map_or(0, |c| c.source().len);
        prop_assume!(covered < history.messages.len());
        let held = Conversation {
            messages: history.messages[covered + 1..].to_vec(),
            ..history.clone_envelope()
        };
        let key = PrefixKey::of(&history.messages[..=covered]);
        let carried = b.thread().carryover().cloned();
        let input = Input::evaluate(&held).resent().after(key).extending(before);
        prop_assert!(!b.thread().takes(&input));
        let refused = matches!(b.turn(input), Err(abridge::Error::LeftOut(n)) if n == covered + 1);
        prop_assert!(refused);
        prop_assert_eq!(b.thread().carryover(), carried.as_ref());
    }

    /// An edit inside the compacted prefix, or a rewind before its end, is
    /// detected: the result is what a fresh compactor makes of that history.
    #[test]
    fn a_diverged_history_is_compacted_afresh(spec in spec(), at in any::<prop::sample::Index>(), rewind in prop::bool::ANY) {
        let full = run(spec);
        let total = Compactor::new(Config::default()).unwrap().count(&full).get();
        let cfg = config(total / 2);
        let mut compactor = Compactor::new(cfg.clone()).unwrap();
        let n = iterations(&full.messages).len();
        let start = prefix(&full, n * 3 / 4);
        let compacted = compactor
            .turn(Input::evaluate(&start).resent())
            .is_ok_and(|o| o.report.compacted);
        prop_assume!(compacted);
        let source = compactor.thread().carryover().unwrap().source();
        let mut history = prefix(&full, n);
        if rewind {
            history.messages.truncate(at.index(source.len));
        } else {
            edit(&mut history, at.index(source.len));
        }
        prop_assert!(!compactor.thread().carryover().unwrap().applies_to(&history));
        let out = compactor.turn(Input::evaluate(&history).resent());
        let fresh = Compactor::new(cfg).unwrap().on_turn(&history, None);
        match (out, fresh) {
            (Ok(out), Ok(fresh)) => {
                prop_assert_eq!(&out.conversation.messages, &fresh.conversation.messages);
                prop_assert_eq!(out.report.tokens_before, fresh.report.tokens_before);
            }
            // Too small a floor for the target: both say so, alike.
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "continuity {:?} vs fresh {:?}", a.map(|o| o.report), b.map(|o| o.report)),
        }
    }
}

#[test]
fn a_prefix_key_extends_to_the_key_of_the_whole() {
    let full = run(Spec::default());
    for cut in 0..=full.messages.len() {
        let (head, rest) = full.messages.split_at(cut);
        assert_eq!(
            PrefixKey::of(head).extend(rest),
            PrefixKey::of(&full.messages)
        );
        assert!(PrefixKey::of(head).matches(&full.messages));
    }
    let mut other = full.messages.clone();
    other.swap(1, 2);
    assert_ne!(PrefixKey::of(&other), PrefixKey::of(&full.messages));
}

/// The same history sent twice in a row is sent the same way twice.
#[test]
fn a_repeated_request_is_sent_identically() {
    let full = run(Spec {
        iterations: 30,
        page_lines: 10,
        ..Spec::default()
    });
    let mut compactor = Compactor::new(config(4_000)).unwrap();
    let a = compactor.turn(Input::evaluate(&full).resent()).unwrap();
    assert!(a.report.compacted);
    let a = a.conversation.into_owned();
    let b = compactor.turn(Input::evaluate(&full).resent()).unwrap();
    assert!(!b.report.compacted);
    assert_eq!(
        abridge::model::encode(&a).unwrap(),
        abridge::model::encode(&b.conversation).unwrap()
    );
}
