//! The blocking facade: an [`AsyncSummarizer`] driven on a tokio runtime so
//! the synchronous compactor (and the CLI and bindings) can use it.

use std::sync::OnceLock;

use abridge::SummarizerSpec;
use abridge_summarize::{AsyncSummarizer, Briefing, Request, SummarizeError, Summarizer};
use tokio::runtime::{Handle, Runtime};

use crate::client::LlmSummarizer;

/// Runs an async summarizer to completion for each blocking call.
///
/// It drives the future on `handle`'s runtime (a proxy passes its own, so
/// connections are pooled there) or, by default, on one small runtime shared
/// by every facade in the process. Safe to call from any thread, including
/// one inside a runtime: the future is then driven from a scoped helper
/// thread. The handle must belong to a multi-thread runtime.
#[derive(Debug)]
pub struct Blocking<S> {
    inner: S,
    handle: Option<Handle>,
}

impl<S: AsyncSummarizer> Blocking<S> {
    /// Drives `inner` on the shared default runtime.
    pub fn new(inner: S) -> Self {
        Blocking {
            inner,
            handle: None,
        }
    }

    /// Drives `inner` on `handle`'s runtime.
    pub fn on(handle: Handle, inner: S) -> Self {
        Blocking {
            inner,
            handle: Some(handle),
        }
    }

    /// The async summarizer.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

fn default_handle() -> Result<Handle, SummarizeError> {
    let rt = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("abridge-llm")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the summarizer runtime: {e}"))
    });
    match rt {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(e) => Err(SummarizeError::Transport(e.clone())),
    }
}

/// Runs `fut` to completion on `handle` (or the shared runtime), from any
/// thread: inside a runtime it waits from a scoped helper thread.
pub(crate) fn block_on<T: Send>(
    handle: Option<&Handle>,
    fut: impl std::future::Future<Output = Result<T, SummarizeError>> + Send,
) -> Result<T, SummarizeError> {
    let handle = match handle {
        Some(h) => h.clone(),
        None => default_handle()?,
    };
    if Handle::try_current().is_err() {
        return handle.block_on(fut);
    }
    std::thread::scope(|s| {
        s.spawn(|| handle.block_on(fut))
            .join()
            .unwrap_or_else(|_| Err(SummarizeError::Transport("LLM call thread panicked".into())))
    })
}

impl LlmSummarizer {
    /// [`complete`](LlmSummarizer::complete), blocking (on the shared runtime).
    pub fn complete_blocking(
        &self,
        system: &str,
        user: &str,
        max_tokens: u32,
    ) -> Result<String, SummarizeError> {
        block_on(None, self.complete(system, user, max_tokens))
    }
}

impl<S: AsyncSummarizer> Summarizer for Blocking<S> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn summarize(&self, req: &Request<'_>) -> Result<String, SummarizeError> {
        let text = self.brief(req)?.text;
        match self.rejects(&text) {
            Some(why) => Err(SummarizeError::Rejected(why)),
            None => Ok(text),
        }
    }

    fn rejects(&self, text: &str) -> Option<String> {
        self.inner.rejects(text)
    }

    fn brief(&self, req: &Request<'_>) -> Result<Briefing, SummarizeError> {
        let handle = match &self.handle {
            Some(h) => h.clone(),
            None => default_handle()?,
        };
        if Handle::try_current().is_err() {
            return handle.block_on(self.inner.brief(req));
        }
        // Blocking inside a runtime would panic: wait from a helper thread.
        std::thread::scope(|s| {
            s.spawn(|| handle.block_on(self.inner.brief(req)))
                .join()
                .unwrap_or_else(|_| {
                    Err(SummarizeError::Transport(
                        "summarizer thread panicked".into(),
                    ))
                })
        })
    }
}

/// The summarizers `[[summarizers]]` declares, in cascade order, ready for
/// [`Compactor::set_summarizers`](abridge::Compactor::set_summarizers) (which
/// appends the offline fact sheet). `handle`: see [`Blocking`].
pub fn cascade(specs: &[SummarizerSpec], handle: Option<Handle>) -> Vec<Box<dyn Summarizer>> {
    specs
        .iter()
        .map(|spec| {
            let llm = LlmSummarizer::from_spec(spec);
            let b = match &handle {
                Some(h) => Blocking::on(h.clone(), llm),
                None => Blocking::new(llm),
            };
            Box::new(b) as Box<dyn Summarizer>
        })
        .collect()
}
