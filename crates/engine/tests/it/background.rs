//! Background preparation: started past the soft threshold, one at a time,
//! applied only when the history still begins with what was compacted.

use abridge::tokens::Calibrated;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abridge::background::Preparer;
use abridge::model::{Conversation, Message, Role, validate};
use abridge::synth::{Spec, run};
use abridge::{Calibration, Compactor, Config, Engine, Event};

fn setup() -> (Conversation, Conversation, Preparer, Arc<AtomicUsize>) {
    let full = run(Spec {
        iterations: 60,
        ..Spec::default()
    });
    let cut = full
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .nth(50)
        .unwrap()
        .0;
    let now = Conversation {
        messages: full.messages[..cut].to_vec(),
        ..full.clone_envelope()
    };
    let builds = Arc::new(AtomicUsize::new(0));
    let counter = builds.clone();
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(15_000);
    let engine = Engine::builder(cfg)
        .subscribe(move |e| {
            if matches!(e, Event::HistoryCompacted { .. }) {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let preparer = Preparer::new(Calibrated::new(10_000), Arc::new(engine));
    (full, now, preparer, builds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_compaction_is_applied_with_the_messages_added_since() {
    let (full, now, mut preparer, builds) = setup();
    let tokens =
        Calibration::default().apply(Compactor::new(Config::default()).unwrap().count(&now));
    preparer.poll(&now, tokens);
    preparer.poll(&now, tokens); // one at a time
    assert_eq!(preparer.started(), 1);
    preparer.wait().await;
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    // The agent went on meanwhile: two more messages.
    let later = Conversation {
        messages: full.messages[..now.messages.len() + 2].to_vec(),
        ..full.clone_envelope()
    };
    let applied = preparer.take(&later).expect("prepared history");
    assert!(validate(&applied).is_empty());
    assert_eq!(
        &applied.messages[applied.messages.len() - 2..],
        &later.messages[now.messages.len()..]
    );
    assert!(
        Compactor::new(Config::default())
            .unwrap()
            .count(&applied)
            .get()
            < tokens.get()
    );
    assert!(preparer.take(&later).is_none(), "used once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_preparation_is_discarded() {
    let (_, now, mut preparer, _) = setup();
    preparer.poll(&now, Calibrated::new(50_000));
    preparer.wait().await;
    // The history was rewritten under the preparation (an earlier message changed).
    let mut changed = now.clone();
    changed.messages[3] = Message::text(Role::User, "edited by the agent");
    assert!(preparer.take(&changed).is_none());
    // Below the soft threshold nothing starts.
    preparer.poll(&now, Calibrated::new(5_000));
    assert!(!preparer.is_running());
}

/// A history that leaves out what the thread's carried compaction covers is
/// prepared from the thread's state: the preparation covers the whole log,
/// and the thread adopts it and goes on with what was added since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_left_out_where_carried_is_prepared_from_the_threads_state() {
    use abridge::{Input, PrefixKey, Thread};
    let (full, now, mut preparer, builds) = setup();
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(15_000);
    let engine = Engine::new(cfg).unwrap();
    let mut thread = Thread::new(&engine);
    let early = Conversation {
        messages: now.messages[..now.messages.len() / 2].to_vec(),
        ..full.clone_envelope()
    };
    let first = thread
        .turn(&engine, Input::compact(&early).resent())
        .unwrap();
    assert!(first.report.compacted);
    let covered = thread.carryover().unwrap().source().len;
    let held = |c: &Conversation| Conversation {
        messages: c.messages[covered..].to_vec(),
        ..c.clone_envelope()
    };
    let key = PrefixKey::of(&now.messages[..covered]);
    preparer.poll_after(
        &held(&now),
        Some((&key, thread.state())),
        Calibrated::new(50_000),
    );
    preparer.wait().await;
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    let later = Conversation {
        messages: full.messages[..now.messages.len() + 2].to_vec(),
        ..full.clone_envelope()
    };
    let carry = preparer
        .take_carryover_after(&held(&later), &key)
        .expect("prepared");
    assert_eq!(carry.source(), PrefixKey::of(&now.messages));
    assert!(carry.applies_to(&later));
    thread.adopt(carry.clone());
    let later_held = held(&later);
    let input = Input::evaluate(&later_held).resent().after(key);
    let out = thread.turn(&engine, input).unwrap();
    let sent = &out.conversation.messages;
    assert!(validate(&out.conversation).is_empty());
    assert_eq!(&sent[..carry.messages().len()], carry.messages());
    assert_eq!(
        &sent[carry.messages().len()..],
        &later.messages[now.messages.len()..]
    );
}
