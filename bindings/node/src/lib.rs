//! The native half of the `abridge` Node package. Messages cross as JSON
//! text (V8's `JSON.stringify`/`JSON.parse` beat walking objects through
//! N-API); `index.js` parses, raises typed errors and adds `prepareStep`.

use abridge_embed::Reported;
use abridge_embed::{Error as EmbedError, Options};
use napi::bindgen_prelude::{AsyncTask, Error, Result};
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::Value;

/// jemalloc for what the module allocates (see Cargo.toml).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// An embed error as a JS error whose `code` is its class name.
fn js(e: EmbedError) -> Error<String> {
    Error::new(e.kind().class_name().to_owned(), e.to_string())
}

fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| js(e.into()))
}

fn options(text: Option<String>) -> Result<Options, String> {
    Options::from_json(text.as_deref().unwrap_or("")).map_err(js)
}

fn to_text(v: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| js(e.into()))
}

fn compact_text(body: &str, options: &Options) -> std::result::Result<String, EmbedError> {
    let out = abridge_embed::compact_text(body, options)?;
    Ok(serde_json::to_string(&out)?)
}

/// Compacts a body or list of messages (JSON); returns `{value, report}` as JSON.
#[napi(js_name = "compact")]
pub fn compact(body: String, options_json: Option<String>) -> Result<String, String> {
    compact_text(&body, &options(options_json)?).map_err(js)
}

/// [`compact`] on the libuv thread pool, for LLM summarizers that take seconds.
pub struct CompactTask {
    body: String,
    options: Options,
}

impl Task for CompactTask {
    type Output = String;
    type JsValue = String;

    /// `{value, report}`, or `{error: {code, message}}` (a rejected Promise
    /// could not carry the error's class).
    fn compute(&mut self) -> napi::Result<String> {
        Ok(compact_text(&self.body, &self.options).unwrap_or_else(|e| {
            serde_json::json!({"error": {"code": e.kind().class_name(), "message": e.to_string()}})
                .to_string()
        }))
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}

/// [`compact`] without blocking the event loop: a Promise of the JSON.
#[napi(js_name = "compactAsync")]
pub fn compact_async(
    body: String,
    options_json: Option<String>,
) -> Result<AsyncTask<CompactTask>, String> {
    Ok(AsyncTask::new(CompactTask {
        body,
        options: options(options_json)?,
    }))
}

/// Every conversation of a file's text (any format abridge reads) written
/// as `to` (`openai`, `anthropic`, `ai-sdk`): a JSON array.
#[napi(js_name = "convert")]
pub fn convert(text: String, to: String) -> Result<String, String> {
    let to = to
        .parse()
        .map_err(|e: String| Error::new("InputError".to_owned(), e))?;
    to_text(&abridge_embed::convert(text.as_bytes(), to).map_err(js)?)
}

/// Tokens of a body or list of messages.
#[napi(js_name = "countTokens")]
pub fn count_tokens(body: String, options_json: Option<String>) -> Result<i64, String> {
    let n = abridge_embed::count_tokens_text(&body, &options(options_json)?).map_err(js)?;
    Ok(i64::try_from(n.get()).unwrap_or(i64::MAX))
}

/// Violations of a body or list of messages, as a JSON array of `{rule, index, message}`.
#[napi(js_name = "validate")]
pub fn validate(body: String, options_json: Option<String>) -> Result<String, String> {
    let o = options(options_json)?;
    let found = abridge_embed::validate(parse(&body)?, o.format).map_err(js)?;
    let list: Vec<Value> = found
        .iter()
        .map(|v| serde_json::json!({"rule": format!("{:?}", v.rule), "index": v.index, "message": v.to_string()}))
        .collect();
    to_text(&list)
}

/// A history grown by an agent loop (see `abridge_embed::Session`); events
/// are buffered for the JS side to hand to its listeners.
#[napi(js_name = "Session")]
pub struct NativeSession {
    inner: abridge_embed::Session,
    events: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

#[napi]
impl NativeSession {
    /// Starts from a body or list of messages (JSON), or an empty history.
    #[napi(constructor)]
    pub fn new(initial: Option<String>, options_json: Option<String>) -> Result<Self, String> {
        let initial = initial.as_deref().map(parse).transpose()?;
        let mut inner =
            abridge_embed::Session::new(initial, &options(options_json)?).map_err(js)?;
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        inner.on_event(move |e| {
            if let (Ok(text), Ok(mut q)) = (serde_json::to_string(e), sink.lock()) {
                q.push(text);
            }
        });
        Ok(NativeSession { inner, events })
    }

    /// Appends a message or an array of messages (JSON); returns their tokens.
    #[napi]
    pub fn push(&mut self, messages: String) -> Result<i64, String> {
        let n = self.inner.push(parse(&messages)?).map_err(js)?;
        Ok(i64::try_from(n.get()).unwrap_or(i64::MAX))
    }

    /// Evaluates the triggers and compacts when one fires; `{tokens, compacted, report, status}` as JSON.
    #[napi]
    pub fn turn(&mut self, usage: Option<i64>) -> Result<String, String> {
        let usage = usage.and_then(|u| u64::try_from(u).ok()).map(Reported::new);
        let t = self.inner.turn(usage).map_err(js)?;
        to_text(&t)
    }

    /// The history to send now (JSON).
    #[napi]
    pub fn messages(&self) -> Result<String, String> {
        to_text(&self.inner.messages().map_err(js)?)
    }

    /// Tokens of the history now.
    #[napi(getter)]
    pub fn tokens(&self) -> i64 {
        i64::try_from(self.inner.tokens().get()).unwrap_or(i64::MAX)
    }

    /// The recall tool's declaration as JSON (`{name, description,
    /// parameters}`), or null when `[recall]` is off.
    #[napi(js_name = "recallTool")]
    pub fn recall_tool(&self) -> Result<Option<String>, String> {
        self.inner
            .recall_tool()
            .map(|t| to_text(&serde_json::to_value(t).unwrap_or_default()))
            .transpose()
    }

    /// Answers a call of the recall tool (its arguments as JSON): the
    /// answer as JSON.
    #[napi]
    pub fn recall(&self, arguments: String) -> Result<String, String> {
        let arguments = parse(&arguments)?;
        to_text(&serde_json::to_value(self.inner.recall(&arguments)).unwrap_or_default())
    }

    /// The compact tool's declaration as JSON (`{name, description,
    /// parameters}`), or null when `[agent] compact_tool` is off.
    #[napi(js_name = "compactTool")]
    pub fn compact_tool(&self) -> Result<Option<String>, String> {
        self.inner.compact_tool().map(|t| to_text(&t)).transpose()
    }

    /// Answers a call of the compact tool (its arguments as JSON) by
    /// compacting the history now: `{text, is_error, compacted,
    /// tokens_before, tokens_after}` as JSON.
    #[napi(js_name = "compactHistory")]
    pub fn compact_history(&mut self, arguments: String) -> Result<String, String> {
        let arguments = parse(&arguments)?;
        to_text(&self.inner.compact_history(&arguments))
    }

    /// Events since the last call, as JSON texts.
    #[napi(js_name = "takeEvents")]
    pub fn take_events(&self) -> Vec<String> {
        self.events
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}
