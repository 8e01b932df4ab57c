//! The engine: what every conversation shares — configuration, the limits
//! derived from it, the summarizer cascade, the snapshot store and the
//! event subscribers. It is built once, never changes while turns run, and
//! is shared behind an `Arc` by every [`Thread`](crate::Thread).

use std::sync::{Arc, Mutex};

use abridge_model::{Conversation, Tool};
use abridge_summarize::{FactConfig, Offline, Summarizer};
use abridge_tokens::{Counted, Registry, TokenCounter};

use crate::config::{Config, RecallConfig};
use crate::error::Result;
use crate::event::Event;
use crate::limits::Limits;
use crate::recall::{
    Admission, Answer, Found, Handle, HandleKey, Original, OriginalCache, RecallInput, RecallScope,
    RecallTool, answer,
};
use crate::report::Attempt;
use crate::snapshot::SnapshotSink;

type Sink = Arc<Mutex<dyn FnMut(&Event) + Send>>;

/// Configuration, limits, summarizers, store and subscribers, shared by
/// every conversation. `Send + Sync`; cloning it is cheap (the summarizers,
/// store and subscribers are shared, not copied).
#[derive(Clone)]
pub struct Engine {
    pub(crate) config: Config,
    pub(crate) limits: Limits,
    pub(crate) facts: FactConfig,
    pub(crate) summarizers: Vec<Arc<dyn Summarizer>>,
    /// The models it knows (the built-in table and the config's), for the
    /// prices of its summarizers' models.
    registry: Registry,
    store: Option<Arc<dyn SnapshotSink>>,
    sinks: Vec<Sink>,
    originals: Arc<OriginalCache>,
    /// The caller adds the recall tool to what it sends (a proxy): the
    /// tokens of its declaration, counted with the history's tools.
    declares_recall: Option<Counted>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.summarizers.iter().map(|s| s.name()).collect();
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .field("summarizers", &names)
            .field("store", &self.store.is_some())
            .field("sinks", &self.sinks.len())
            .field("originals", &self.originals.size())
            .finish()
    }
}

/// What an engine is built with besides its config: everything is set
/// before the engine is shared, and nothing changes it after.
///
/// ```
/// use abridge::{Config, Engine};
///
/// let engine = Engine::builder(Config::default())
///     .subscribe(|e| eprintln!("{e:?}"))
///     .build()?;
/// assert_eq!(engine.summarizer_names(), ["offline"]);
/// # Ok::<(), abridge::Error>(())
/// ```
#[must_use]
pub struct EngineBuilder {
    config: Config,
    registry: Registry,
    summarizers: Vec<Box<dyn Summarizer>>,
    store: Option<Box<dyn SnapshotSink>>,
    originals: Option<Arc<OriginalCache>>,
    declares_recall: bool,
    sinks: Vec<Sink>,
}

impl EngineBuilder {
    /// The model registry (the built-in one by default); the config's
    /// `[models]` are added to it.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// The summarizer cascade, tried in order. The offline fact sheet is
    /// appended as the last resort unless `summary.offline = false`, so a
    /// compaction that needs a briefing always gets one. (The config's
    /// `[[summarizers]]` are built by `abridge_llm::cascade`.)
    pub fn summarizers(mut self, cascade: Vec<Box<dyn Summarizer>>) -> Self {
        self.summarizers = cascade;
        self
    }

    /// Records a snapshot of every compaction (off by default). A store
    /// that fails makes a `snapshot_failed` event; the compaction still
    /// returns its result and the caller's history is untouched.
    pub fn store(mut self, store: Box<dyn SnapshotSink>) -> Self {
        self.store = Some(store);
        self
    }

    /// The memory of originals this engine keeps and recalls, shared with
    /// other engines (a proxy's engines answer for each other); by default
    /// its own, of `[recall] memory_megabytes`.
    pub fn originals(mut self, cache: Arc<OriginalCache>) -> Self {
        self.originals = Some(cache);
        self
    }

    /// The caller adds the recall tool's declaration to the tools of every
    /// history it sends that has tools (as the proxy does): budgets count it.
    pub fn declares_recall_tool(mut self) -> Self {
        self.declares_recall = true;
        self
    }

    /// Calls `f` with every event.
    pub fn subscribe(mut self, f: impl FnMut(&Event) + Send + 'static) -> Self {
        self.sinks.push(Arc::new(Mutex::new(f)));
        self
    }

    /// The engine, or why its config cannot make one.
    pub fn build(self) -> Result<Engine> {
        let EngineBuilder {
            config,
            mut registry,
            summarizers,
            store,
            originals,
            declares_recall,
            sinks,
        } = self;
        config.check()?;
        registry.extend(config.models.clone());
        let originals = originals.unwrap_or_else(|| Arc::new(OriginalCache::of(&config.recall)));
        let mut engine = Engine {
            limits: Limits::new(&config, &registry),
            facts: config.facts(),
            config,
            summarizers: Vec::new(),
            registry,
            store: store.map(Arc::from),
            sinks,
            originals,
            declares_recall: None,
        };
        engine.set_summarizers(summarizers);
        if declares_recall {
            engine.declares_recall = engine
                .recall_tool()
                .map(|t| engine.counter().count_tools(Some(&[t.to_tool()])));
        }
        Ok(engine)
    }
}

impl Engine {
    /// An engine with the built-in model registry plus the config's
    /// `[models]`, and nothing else: [`builder`](Self::builder) for more.
    pub fn new(config: Config) -> Result<Self> {
        Self::builder(config).build()
    }

    /// An engine to be built from `config` and what the builder adds.
    pub fn builder(config: Config) -> EngineBuilder {
        EngineBuilder {
            config,
            registry: Registry::new(),
            summarizers: Vec::new(),
            store: None,
            originals: None,
            declares_recall: false,
            sinks: Vec::new(),
        }
    }

    /// What a summarizer attempt cost in dollars: its usage (when its
    /// provider reported it) at its model's prices (when known; the model
    /// is the name's part after `kind:`).
    pub fn attempt_cost(&self, attempt: &Attempt) -> Option<f64> {
        let usage = attempt.usage?;
        let name = &attempt.summarizer;
        let model = name.split_once(':').map_or(name.as_str(), |(_, m)| m);
        Some(self.registry.lookup(model)?.price?.cost(&usage))
    }

    /// The summarizers' names, in the order they are tried.
    pub fn summarizer_names(&self) -> Vec<String> {
        self.summarizers.iter().map(|s| s.name()).collect()
    }

    /// Replaces the summarizer cascade (see [`EngineBuilder::summarizers`]):
    /// for a [`Compactor`](crate::Compactor), which owns its engine.
    pub(crate) fn set_summarizers(&mut self, cascade: Vec<Box<dyn Summarizer>>) {
        let mut cascade: Vec<Arc<dyn Summarizer>> = cascade.into_iter().map(Arc::from).collect();
        if self.config.summary.offline {
            cascade.push(Arc::new(Offline));
        }
        self.summarizers = cascade;
    }

    /// Sets the store (see [`EngineBuilder::store`]): for a
    /// [`Compactor`](crate::Compactor), which owns its engine.
    pub(crate) fn set_store(&mut self, store: Box<dyn SnapshotSink>) {
        self.store = Some(Arc::from(store));
    }

    /// The recall tool's declaration, when `[recall]` is on.
    pub fn recall_tool(&self) -> Option<RecallTool> {
        let r = &self.config.recall;
        r.enabled.then(|| RecallTool::new(&r.tool))
    }

    /// Tokens of the recall tool's declaration when the caller adds it to
    /// `tools` ([`declare_recall_tool`](Self::declare_recall_tool)): for a
    /// history that has tools of its own and not one of that name (an agent
    /// that declares it itself has it counted with its tools).
    pub(crate) fn recall_tool_tokens(&self, tools: Option<&[Tool]>) -> Counted {
        let Some(tokens) = self.declares_recall else {
            return Counted::ZERO;
        };
        let name = self.config.recall.tool.as_str();
        match tools {
            Some(t) if !t.is_empty() && !t.iter().any(|t| t.declares(name)) => tokens,
            _ => Counted::ZERO,
        }
    }

    /// The original a handle names: from memory, else from the store.
    pub fn original(&self, handle: &Handle) -> Option<Arc<Original>> {
        self.original_in(handle, None)
    }

    /// The original a handle names, when `scope` (a shared proxy's tenant
    /// and session) may read it; without a scope, any. An original of
    /// another scope is answered as if it did not exist.
    pub fn original_in(
        &self,
        handle: &Handle,
        scope: Option<&RecallScope>,
    ) -> Option<Arc<Original>> {
        if let Some(o) = self.originals.get(handle)
            && scope.is_none_or(|s| o.belongs(Some(&s.key)))
        {
            return Some(o);
        }
        let stored = self
            .with_store(|s| s.recall(handle))
            .and_then(|r| match r {
                Ok(o) => o,
                Err(e) => {
                    self.emit(&Event::RecallFailed {
                        handle: handle.clone(),
                        error: e.to_string(),
                    });
                    None
                }
            })?;
        let admission = scope.map(|s| s.admits(&stored));
        if admission == Some(Admission::Refused) {
            return None;
        }
        let original = Arc::new(stored.original);
        // A legacy original stays out of memory: there its session would
        // not be checked.
        if admission != Some(Admission::Legacy) {
            self.originals.put(original.clone());
        }
        Some(original)
    }

    /// Answers one call of the recall tool, given its arguments (a query
    /// searches nothing: see [`Thread::recall`](crate::Thread::recall)).
    pub fn recall(&self, arguments: &serde_json::Value) -> Answer {
        self.recall_in(arguments, None, &[])
    }

    /// Answers one call of the recall tool for `scope` (see
    /// [`original_in`](Self::original_in)); a query searches the originals
    /// of `searchable` (the conversation's, newest last).
    pub fn recall_in(
        &self,
        arguments: &serde_json::Value,
        scope: Option<&RecallScope>,
        searchable: &[Handle],
    ) -> Answer {
        let r = &self.config.recall;
        let a = answer(
            &r.tool,
            RecallInput::parse(arguments),
            |h| self.original_in(h, scope),
            searchable,
            r.page_chars,
        );
        self.emit(&Event::Recalled {
            handle: a.handle.clone(),
            found: !a.is_error,
            bytes: a.bytes,
            page: a.page,
            pages: a.pages,
        });
        a
    }

    /// Keeps a compaction's originals in memory, each once; returns them
    /// for the store.
    pub(crate) fn keep_originals(&self, originals: Vec<Original>) -> Vec<Arc<Original>> {
        let mut seen = std::collections::HashSet::new();
        let kept: Vec<Arc<Original>> = originals
            .into_iter()
            .filter(|o| seen.insert(o.handle.clone()))
            .map(Arc::new)
            .collect();
        for o in &kept {
            self.originals.put(o.clone());
        }
        kept
    }

    /// Where the clipping policies keep what they replace: for recall, and
    /// without it for the refill alone, which finds what it gives back by
    /// the handles its placeholders name (a compaction without recall
    /// takes them out at its end).
    pub(crate) fn found<'a>(
        &'a self,
        originals: &'a mut Vec<Original>,
        input: &'a Conversation,
        key: Option<&'a HandleKey>,
    ) -> Found<'a> {
        let recall = self.recall_for(input.tools.as_deref());
        Found {
            tool: recall.map(|r| r.tool.as_str()),
            originals,
            input: &input.messages,
            key,
        }
    }

    /// `[recall]` when the model that reads a history with these `tools`
    /// can call the recall tool: recall is on, and either the caller adds
    /// the tool to histories that have tools
    /// ([`declare_recall_tool`](Self::declare_recall_tool)) and this one
    /// has some, or the caller declares it itself. A history sent with no tools (an agent that acts
    /// through its text) gets no handles and no index: nothing in it asks
    /// the model to call a tool it does not have.
    pub(crate) fn recall_for(&self, tools: Option<&[Tool]>) -> Option<&RecallConfig> {
        let r = &self.config.recall;
        let callable = self.declares_recall.is_none() || tools.is_some_and(|t| !t.is_empty());
        (r.enabled && callable).then_some(r)
    }

    /// Adds a subscriber (see [`EngineBuilder::subscribe`]): for a
    /// [`Compactor`](crate::Compactor), which owns its engine.
    pub(crate) fn subscribe(&mut self, f: impl FnMut(&Event) + Send + 'static) {
        self.sinks.push(Arc::new(Mutex::new(f)));
    }

    /// The config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Window, thresholds and budgets derived from the config and registry.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A token counter with this engine's tokenizer and an empty cache.
    pub(crate) fn counter(&self) -> TokenCounter {
        TokenCounter::new(self.limits.tokenizer)
    }

    /// Hands an event to every subscriber.
    pub(crate) fn emit(&self, e: &Event) {
        for s in &self.sinks {
            // A subscriber that panicked keeps receiving: its state is its own.
            let mut f = s.lock().unwrap_or_else(|p| p.into_inner());
            f(e);
        }
    }

    /// Runs `f` with the snapshot store, when one is set.
    pub(crate) fn with_store<T>(&self, f: impl FnOnce(&dyn SnapshotSink) -> T) -> Option<T> {
        self.store.as_deref().map(f)
    }
}
