//! A turn stopped from outside (a proxy's client left): it ends with
//! `Cancelled`, records nothing, and leaves the thread able to compact the
//! same history on the next turn.

use std::sync::{Arc, Mutex};

use abridge::summarize::{Request, SummarizeError, Summarizer};
use abridge::synth::{Spec, run};
use abridge::{
    Cancel, Config, Engine, Error, Event, Input, SnapshotData, SnapshotError, SnapshotId,
    SnapshotSink, Thread,
};

/// A summarizer that sets the flag while it works, as a client leaving
/// mid-briefing would.
struct LeavesMidway(Cancel);

impl Summarizer for LeavesMidway {
    fn name(&self) -> String {
        "leaves-midway".into()
    }

    fn summarize(&self, _: &Request<'_>) -> Result<String, SummarizeError> {
        self.0.cancel();
        Ok("The agent browsed the catalogue and compared three products.".into())
    }
}

/// Counts the snapshots recorded.
struct Counting(Arc<Mutex<u64>>);

impl SnapshotSink for Counting {
    fn record(&self, _: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        let mut n = self.0.lock().unwrap();
        *n += 1;
        Ok(SnapshotId(*n as i64))
    }
}

/// Compaction to 3,000 tokens, keeping the last iteration.
fn config() -> Config {
    let mut config = Config::default();
    config.budget.target_tokens = Some(3_000);
    config.budget.min_iterations = 1;
    config
}

fn engine(cancel: &Cancel, recorded: &Arc<Mutex<u64>>, events: &Arc<Mutex<Vec<Event>>>) -> Engine {
    let seen = events.clone();
    Engine::builder(config())
        .summarizers(vec![Box::new(LeavesMidway(cancel.clone()))])
        .store(Box::new(Counting(recorded.clone())))
        .subscribe(move |e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap()
}

#[test]
fn a_turn_cancelled_mid_briefing_records_nothing_and_the_next_one_compacts() {
    let conv = run(Spec {
        iterations: 40,
        ..Spec::default()
    });
    let (recorded, events) = (Arc::default(), Arc::default());
    let cancel = Cancel::new();
    let engine = engine(&cancel, &recorded, &events);
    let mut thread = Thread::new(&engine);

    let turned = thread.turn(
        &engine,
        Input::compact(&conv).resent().cancelled_by(&cancel),
    );
    assert!(matches!(turned, Err(Error::Cancelled)), "{turned:?}");
    assert!(cancel.is_cancelled(), "the summarizer ran and set the flag");
    assert_eq!(
        *recorded.lock().unwrap(),
        0,
        "no snapshot of a cancelled turn"
    );
    assert!(thread.carryover().is_none(), "nothing carried over");
    let compacted = |e: &Event| matches!(e, Event::HistoryCompacted { .. });
    assert!(!events.lock().unwrap().iter().any(compacted));

    // The same thread, not cancelled this time, compacts as it would have.
    let outcome = thread
        .turn(
            &engine,
            Input::compact(&conv).resent().cancelled_by(&Cancel::new()),
        )
        .unwrap();
    assert!(outcome.report.compacted);
    assert!(outcome.report.tokens_after.get() <= 3_000);
    assert_eq!(*recorded.lock().unwrap(), 1);
    assert!(thread.carryover().is_some());
}

#[test]
fn a_turn_cancelled_before_it_starts_counts_nothing() {
    let conv = run(Spec {
        iterations: 10,
        ..Spec::default()
    });
    let (recorded, events) = (Arc::default(), Arc::default());
    let cancel = Cancel::new();
    let engine = engine(&Cancel::new(), &recorded, &events);
    let mut thread = Thread::new(&engine);
    cancel.cancel();
    let turned = thread.turn(&engine, Input::evaluate(&conv).cancelled_by(&cancel));
    assert!(matches!(turned, Err(Error::Cancelled)));
    assert!(
        events.lock().unwrap().is_empty(),
        "not even a history_size event"
    );
}

/// Waits in `record` until `n` calls are inside it at once.
struct Meeting(std::sync::Barrier);

impl SnapshotSink for Meeting {
    fn record(&self, _: &SnapshotData<'_>) -> Result<SnapshotId, SnapshotError> {
        self.0.wait();
        Ok(SnapshotId(1))
    }
}

/// Two threads of one engine (two sessions of a proxy's model) are in the
/// store at the same time: the engine holds no lock around it, so a slow
/// store call of one session holds up no other.
#[test]
fn two_threads_of_one_engine_record_at_once() {
    let conv = run(Spec {
        iterations: 40,
        ..Spec::default()
    });
    let engine = Engine::builder(config())
        .store(Box::new(Meeting(std::sync::Barrier::new(2))))
        .build()
        .unwrap();
    let engine = Arc::new(engine);
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..2 {
        let (engine, conv, tx) = (engine.clone(), conv.clone(), tx.clone());
        std::thread::spawn(move || {
            let mut thread = Thread::new(&engine);
            let out = thread.turn(&engine, Input::compact(&conv).resent());
            let _ = tx.send(out.map(|o| o.report.snapshot));
        });
    }
    // With one lock around the store, the second call never enters and
    // the first waits at the barrier for ever.
    for _ in 0..2 {
        let recorded = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a thread is stuck behind the other's store call");
        assert_eq!(recorded.unwrap(), Some(SnapshotId(1)));
    }
}
