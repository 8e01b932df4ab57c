//! The native half of the `abridge` Python package. Messages cross as JSON
//! text; `abridge/__init__.py` parses, converts LangChain messages and calls
//! back. Engine work runs without the GIL, so LLM summarizers do not stall
//! other Python threads.

use std::sync::{Arc, Mutex};

use abridge_embed::{Error as EmbedError, ErrorKind, Options, Reported};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

/// jemalloc for what the module allocates (see Cargo.toml).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

create_exception!(
    _native,
    AbridgeError,
    PyException,
    "Base class of abridge's errors."
);
create_exception!(
    _native,
    InputError,
    AbridgeError,
    "The messages, body or JSON cannot be read."
);
create_exception!(
    _native,
    ConfigError,
    AbridgeError,
    "An option or the config is wrong."
);
create_exception!(
    _native,
    CannotShrinkError,
    AbridgeError,
    "What compaction may not touch is already over the target."
);
create_exception!(
    _native,
    EngineError,
    AbridgeError,
    "Any other refusal of the engine."
);

/// An embed error as the exception of its kind.
fn py_err(e: EmbedError) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::Input => InputError::new_err(msg),
        ErrorKind::Config => ConfigError::new_err(msg),
        ErrorKind::CannotShrink => CannotShrinkError::new_err(msg),
        ErrorKind::Engine => EngineError::new_err(msg),
    }
}

fn parse(text: &str) -> Result<serde_json::Value, EmbedError> {
    Ok(serde_json::from_str(text)?)
}

fn to_text(v: &impl serde::Serialize) -> Result<String, EmbedError> {
    Ok(serde_json::to_string(v)?)
}

fn parse_options(text: &str) -> PyResult<Options> {
    Options::from_json(text).map_err(py_err)
}

/// Compacts a body or list of messages (JSON); returns `{value, report}` as JSON.
#[pyfunction]
#[pyo3(signature = (body, options = ""))]
fn compact(py: Python<'_>, body: &str, options: &str) -> PyResult<String> {
    let o = parse_options(options)?;
    py.detach(|| to_text(&abridge_embed::compact_text(body, &o)?))
        .map_err(py_err)
}

/// Tokens of a body or list of messages.
#[pyfunction]
#[pyo3(signature = (body, options = ""))]
fn count_tokens(py: Python<'_>, body: &str, options: &str) -> PyResult<u64> {
    let o = parse_options(options)?;
    py.detach(|| abridge_embed::count_tokens_text(body, &o))
        .map(|n| n.get())
        .map_err(py_err)
}

/// Violations of a body or list of messages, as a JSON array of `{rule, index, message}`.
#[pyfunction]
#[pyo3(signature = (body, options = ""))]
fn validate(body: &str, options: &str) -> PyResult<String> {
    let o = parse_options(options)?;
    let found = abridge_embed::validate(parse(body).map_err(py_err)?, o.format).map_err(py_err)?;
    let list: Vec<serde_json::Value> = found
        .iter()
        .map(|v| serde_json::json!({"rule": format!("{:?}", v.rule), "index": v.index, "message": v.to_string()}))
        .collect();
    to_text(&list).map_err(py_err)
}

/// Every conversation of a file's text (any format abridge reads) written
/// as `to` (`openai`, `anthropic`, `ai-sdk`): a JSON array.
#[pyfunction]
fn convert(text: &str, to: &str) -> PyResult<String> {
    let to = to.parse().map_err(InputError::new_err)?;
    to_text(&abridge_embed::convert(text.as_bytes(), to).map_err(py_err)?).map_err(py_err)
}

/// A history grown by an agent loop; events are buffered for the Python
/// side to hand to its callbacks.
#[pyclass(module = "abridge._native")]
struct Session {
    inner: Mutex<abridge_embed::Session>,
    events: Arc<Mutex<Vec<String>>>,
}

impl Session {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut abridge_embed::Session) -> Result<T, EmbedError>,
    ) -> PyResult<T> {
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| EngineError::new_err("the session is poisoned by an earlier panic"))?;
        f(&mut inner).map_err(py_err)
    }
}

#[pymethods]
impl Session {
    /// Starts from a body or list of messages (JSON), or an empty history.
    #[new]
    #[pyo3(signature = (initial = None, options = ""))]
    fn new(initial: Option<&str>, options: &str) -> PyResult<Self> {
        let initial = initial.map(parse).transpose().map_err(py_err)?;
        let mut inner =
            abridge_embed::Session::new(initial, &parse_options(options)?).map_err(py_err)?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        inner.on_event(move |e| {
            if let (Ok(text), Ok(mut q)) = (serde_json::to_string(e), sink.lock()) {
                q.push(text);
            }
        });
        Ok(Session {
            inner: Mutex::new(inner),
            events,
        })
    }

    /// Appends a message or an array of messages (JSON); returns their tokens.
    fn push(&self, messages: &str) -> PyResult<u64> {
        self.with(|s| s.push(parse(messages)?).map(|n| n.get()))
    }

    /// Evaluates the triggers and compacts when one fires (without the GIL);
    /// `{tokens, compacted, report, status}` as JSON.
    #[pyo3(signature = (usage = None))]
    fn turn(&self, py: Python<'_>, usage: Option<u64>) -> PyResult<String> {
        py.detach(|| self.with(|s| to_text(&s.turn(usage.map(Reported::new))?)))
    }

    /// The history to send now (JSON).
    fn messages(&self) -> PyResult<String> {
        self.with(|s| to_text(&s.messages()?))
    }

    /// Tokens of the history now.
    #[getter]
    fn tokens(&self) -> PyResult<u64> {
        self.with(|s| Ok(s.tokens().get()))
    }

    /// The recall tool's declaration as JSON (`{name, description,
    /// parameters}`), or `None` when `[recall]` is off.
    fn recall_tool(&self) -> PyResult<Option<String>> {
        self.with(|s| {
            s.recall_tool()
                .map(|t| to_text(&serde_json::to_value(t).unwrap_or_default()))
                .transpose()
        })
    }

    /// Answers a call of the recall tool (its arguments as JSON), without
    /// the GIL (the store may be read): the answer as JSON.
    fn recall(&self, py: Python<'_>, arguments: &str) -> PyResult<String> {
        let arguments = parse(arguments).map_err(py_err)?;
        py.detach(|| {
            self.with(|s| to_text(&serde_json::to_value(s.recall(&arguments)).unwrap_or_default()))
        })
    }

    /// The compact tool's declaration as JSON (`{name, description,
    /// parameters}`), or `None` when `[agent] compact_tool` is off.
    fn compact_tool(&self) -> PyResult<Option<String>> {
        self.with(|s| s.compact_tool().map(|t| to_text(&t)).transpose())
    }

    /// Answers a call of the compact tool (its arguments as JSON) by
    /// compacting the history now, without the GIL (a summarizer may be
    /// called): `{text, is_error, compacted, tokens_before, tokens_after}`
    /// as JSON.
    fn compact_history(&self, py: Python<'_>, arguments: &str) -> PyResult<String> {
        let arguments = parse(arguments).map_err(py_err)?;
        py.detach(|| self.with(|s| to_text(&s.compact_history(&arguments))))
    }

    /// Events since the last call, as JSON texts.
    fn take_events(&self) -> Vec<String> {
        self.events
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}

/// The module `abridge._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AbridgeError", py.get_type::<AbridgeError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("CannotShrinkError", py.get_type::<CannotShrinkError>())?;
    m.add("EngineError", py.get_type::<EngineError>())?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_class::<Session>()?;
    Ok(())
}
