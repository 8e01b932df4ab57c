//! The engines sessions share: one per model, built on the first request
//! that names it with the proxy's config (and the request's model when the
//! config names none), then shared by every session's requests of that
//! model; and one memory of originals for all of them, within
//! `[recall] memory_megabytes`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use abridge::model::{Conversation, Family, Wire};
use abridge::recall::OriginalCache;
use abridge::{Config, Engine};

use crate::store::SessionSink;
use crate::store::SharedStore;

/// Most models remembered; past it the map starts afresh (sessions keep
/// the engines they hold).
const MODELS: usize = 64;

/// A model's engines.
#[derive(Debug)]
pub(crate) struct ModelEngines {
    /// The request path's: deterministic policies and the offline briefing,
    /// which never wait on the network.
    pub(crate) request: Arc<Engine>,
    /// The configured LLM summarizers', for briefings prepared in the
    /// background (none without `[[summarizers]]`).
    pub(crate) background: Option<Arc<Engine>>,
}

/// Engines by model.
#[derive(Debug)]
pub(crate) struct Engines {
    by_model: Mutex<HashMap<EngineKey, Arc<ModelEngines>>>,
    /// The originals every engine keeps in memory (for the recall tool).
    originals: Arc<OriginalCache>,
    /// The upstream of each API, where the agent's own model is asked
    /// last (`summary.agent_model_last`).
    upstreams: Vec<(Family, String)>,
}

/// A model (the config's or the request's), whether the proxy answers
/// the recall tool on the API its requests come by, and that API's family
/// (where the agent's own model is asked last).
type EngineKey = (Option<String>, bool, Family);

impl Engines {
    /// No engine yet; originals kept in memory within `recall`'s bound;
    /// `serve`'s upstreams.
    pub(crate) fn new(
        recall: &abridge::RecallConfig,
        serve: &crate::config::ServeConfig,
    ) -> Engines {
        let upstreams = abridge::model::Provider::ALL
            .into_iter()
            .map(|p| (p.facts().family, serve.upstream(p)));
        Engines {
            by_model: Mutex::default(),
            originals: Arc::new(OriginalCache::of(recall)),
            upstreams: upstreams
                .filter(|(_, url)| !url.is_empty())
                .map(|(f, url)| (f, url.trim_end_matches('/').to_owned()))
                .collect(),
        }
    }

    /// The originals kept in memory.
    pub(crate) fn originals(&self) -> &OriginalCache {
        &self.originals
    }

    /// The engines for a conversation: the config's, with the request's
    /// model when the config names none.
    pub(crate) fn of(
        &self,
        base: &Config,
        conv: &Conversation,
        store: Option<&SharedStore>,
        handle: &tokio::runtime::Handle,
    ) -> Result<Arc<ModelEngines>, String> {
        let model = base.model.clone().or_else(|| conv.model.clone());
        // Where the proxy cannot answer the tool, nothing may point at it.
        let recalls = crate::recall::on(Wire::of(conv.format)).is_some();
        let key = (model.clone(), recalls, conv.family);
        let mut map = self.by_model.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = map.get(&key) {
            return Ok(e.clone());
        }
        let mut config = base.clone();
        config.model = model;
        config.recall.enabled &= recalls;
        // One memory of originals for all: a background briefing's handles
        // are answered like the request path's, and many models never
        // hold more than one bound.
        let originals = self.originals.clone();
        let build = |summarizers| -> Result<Arc<Engine>, String> {
            let mut engine = Engine::builder(config.clone())
                .originals(originals.clone())
                .declares_recall_tool()
                .summarizers(summarizers);
            if let Some(store) = store {
                engine = engine.store(Box::new(SessionSink(store.clone())));
            }
            engine.build().map(Arc::new).map_err(|e| e.to_string())
        };
        let upstream = self
            .upstreams
            .iter()
            .find(|(f, _)| *f == conv.family)
            .map(|(_, url)| url.as_str());
        let specs = config.summarizer_specs(conv.family, upstream);
        let background = match specs.is_empty() {
            true => None,
            false => Some(build(abridge_llm::cascade(&specs, Some(handle.clone())))?),
        };
        let engines = Arc::new(ModelEngines {
            request: build(Vec::new())?,
            background,
        });
        if map.len() >= MODELS {
            map.clear();
        }
        map.insert(key, engines.clone());
        Ok(engines)
    }
}
