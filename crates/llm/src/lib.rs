//! LLM summarizers for abridge over plain HTTP: OpenAI-compatible Chat
//! Completions (OpenAI, vLLM, llama.cpp server, Ollama) and Anthropic
//! Messages, with rustls (ring) and no SDK in between.
//!
//! The history is serialized compactly (one-line markers for tool calls,
//! tool output truncated, oldest output dropped first to fit), the prompt
//! lives in `prompt.md`, a previous briefing comes with a budget hint by its
//! size, and the kept tail is shown read-only. [`LlmSummarizer`] is an
//! [`AsyncSummarizer`](abridge_summarize::AsyncSummarizer) with one pooled
//! HTTP client; [`Blocking`] drives it for the synchronous compactor, and
//! [`cascade`] builds the `[[summarizers]]` of a config. The offline fact
//! sheet stays the compactor's last resort.
//!
//! ```
//! use abridge::{Config, Compactor};
//! use abridge_llm::cascade;
//!
//! let config = Config::from_toml(r#"
//!     [[summarizers]]
//!     kind = "openai"
//!     model = "gpt-4o-mini"
//!     base_url = "http://127.0.0.1:8080/v1"
//!     timeout_secs = 20
//! "#)?;
//! let summarizers = cascade(&config.summarizers, None);
//! assert_eq!(summarizers[0].name(), "openai:gpt-4o-mini");
//! let mut compactor = Compactor::new(config)?;
//! compactor.set_summarizers(summarizers);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod blocking;
mod client;
mod serialize;

pub use blocking::{Blocking, cascade};
pub use client::{DEFAULT_PROMPT, LlmSummarizer, client_builder};
