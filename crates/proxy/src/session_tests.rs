//! Tests of `session.rs`.

use super::*;
use crate::tenant::Secret;

fn state(id: &str) -> SessionState {
    let secret = Secret::from_text("test");
    let tenant = secret.tenant(secret.tenant_of(&HeaderMap::new(), None));
    let engine = Arc::new(Engine::new(abridge::Config::default()).unwrap());
    SessionState::new(SessionId(id.into()), tenant, Wire::Chat, engine)
}

/// Idle sessions leave once saved or queued, least recently used
/// first; a busy one stays, and so does one the store refused; a
/// request that held one before it left sees it spilled.
#[tokio::test]
async fn idle_sessions_leave_saved_and_marked() {
    let sessions = Sessions::new(8, 1 << 20);
    let (a, b, c) = (
        sessions.insert(state("a")),
        sessions.insert(state("b")),
        sessions.insert(state("c")),
    );
    sessions.insert(state("d"));
    c.lock().await.used = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let busy = b.clone().try_lock_owned().unwrap();
    let idle = std::time::Duration::from_millis(1);
    tokio::time::sleep(idle * 5).await;
    // A store that refuses the state: nothing leaves, each idle one was tried.
    let mut tried = Vec::new();
    let refused = sessions.spill_idle(idle, |s| {
        tried.push(s.id.0.clone());
        Saved::Failed
    });
    assert_eq!(
        (refused, tried),
        ((0, 0), vec!["a".to_owned(), "d".to_owned()])
    );
    assert!(!a.lock().await.spilled);
    // The store takes a, queues d's save behind a slow write: both leave.
    let mut saved = Vec::new();
    let (gone, held) = sessions.spill_idle(idle, |s| {
        saved.push(s.id.0.clone());
        match s.id.0.as_str() {
            "a" => Saved::Written,
            _ => Saved::Queued,
        }
    });
    assert_eq!(saved, ["a", "d"]);
    assert_eq!((gone, held), (2, 0));
    assert!(a.lock().await.spilled);
    assert!(sessions.get(&SessionId("a".into())).is_none());
    drop(busy);
    let (gone, _) = sessions.spill_idle(idle, |_| Saved::Written);
    assert_eq!(gone, 1, "b once it is free");
    assert_eq!(sessions.len(), 1);
    assert!(!c.lock().await.spilled);
}
