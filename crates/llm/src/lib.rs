//! LLM summarizers for abridge over plain HTTP: OpenAI-compatible Chat
//! Completions (OpenAI, vLLM, llama.cpp server, Ollama) and Anthropic
//! Messages, with rustls (ring) and no SDK in between.
//!
//! The history is serialized compactly (one-line markers for tool calls,
//! tool output truncated, oldest output dropped first to fit), the prompt
//! lives in `prompt.md`, a previous briefing comes with a budget hint by its
//! size, and the kept tail is shown read-only. Each summarizer implements
//! [`abridge_summarize::Summarizer`]; put them in a compactor's cascade
//! (`Compactor::set_summarizers`), where the offline fact sheet stays the
//! last resort. Calls are blocking: from async code, run a compaction in
//! `spawn_blocking`.
//!
//! ```
//! use abridge_llm::{Api, LlmSummarizer};
//! use abridge_summarize::Summarizer;
//!
//! let s = LlmSummarizer::new(Api::OpenAi, "gpt-4o-mini")
//!     .base_url("http://127.0.0.1:8080/v1")
//!     .timeout(std::time::Duration::from_secs(20));
//! assert_eq!(s.name(), "openai:gpt-4o-mini");
//! ```

mod client;
mod serialize;

pub use client::{Api, DEFAULT_PROMPT, LlmSummarizer};
