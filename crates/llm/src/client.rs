//! LLM summarizers over plain HTTP (reqwest, rustls with ring).

use std::sync::Once;
use std::time::{Duration, Instant};

use abridge_summarize::{DEFAULT_ERROR_PREFIXES, Request, SummarizeError, Summarizer};
use serde_json::{Value, json};

use crate::serialize::{cut, history};

/// The default prompt (`prompt.md`), reviewed as text.
pub const DEFAULT_PROMPT: &str = include_str!("prompt.md");

/// Which wire API the summarizer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI-compatible Chat Completions (OpenAI, vLLM, llama.cpp server, Ollama).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Api {
    /// `openai` or `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    /// Default base URL: OpenAI's ends in `/v1`; Anthropic's is the host root.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::OpenAi => "https://api.openai.com/v1",
            Api::Anthropic => "https://api.anthropic.com",
        }
    }

    /// Environment variable holding the API key.
    pub fn key_variable(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

/// A summarizer backed by an LLM.
#[derive(Debug, Clone)]
pub struct LlmSummarizer {
    api: Api,
    model: String,
    base_url: String,
    key: Option<String>,
    timeout: Duration,
    max_output_tokens: u32,
    prompt: String,
    instructions: Option<String>,
    input_chars: usize,
    error_prefixes: Vec<String>,
}

static TLS: Once = Once::new();

impl LlmSummarizer {
    /// A summarizer for `model` with the default base URL, the key from the
    /// API's environment variable (none is fine for local servers), a 30 s
    /// timeout and the default prompt.
    pub fn new(api: Api, model: impl Into<String>) -> Self {
        LlmSummarizer {
            api,
            model: model.into(),
            base_url: api.default_base_url().to_owned(),
            key: std::env::var(api.key_variable())
                .ok()
                .filter(|k| !k.is_empty()),
            timeout: Duration::from_secs(30),
            max_output_tokens: 8_000,
            prompt: DEFAULT_PROMPT.to_owned(),
            instructions: None,
            input_chars: 400_000,
            error_prefixes: DEFAULT_ERROR_PREFIXES.map(str::to_owned).to_vec(),
        }
    }

    /// Sets the base URL (OpenAI-compatible: ending in `/v1`; Anthropic: the host root).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the API key.
    pub fn key(mut self, key: Option<String>) -> Self {
        self.key = key;
        self
    }

    /// Sets the time limit of one attempt (a 429 retry included).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Replaces the system prompt (e.g. from a `.md` file).
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// Appends custom instructions to the prompt.
    pub fn instructions(mut self, text: Option<String>) -> Self {
        self.instructions = text;
        self
    }

    /// Most characters of history sent (older tool output is dropped first).
    pub fn input_chars(mut self, n: usize) -> Self {
        self.input_chars = n;
        self
    }

    /// The user message: previous briefing with its budget hint, the
    /// history, and the kept tail shown read-only.
    pub fn user_message(&self, req: &Request<'_>) -> String {
        let mut msg = String::new();
        msg.push_str(&format!(
            "Task as the user gave it:\n{}\n\n",
            req.task.trim()
        ));
        if let Some(prev) = req.previous {
            let ratio = req.tokenizer.count(prev) as f64 / req.budget_tokens.max(1) as f64;
            let hint = if ratio < 0.6 {
                "Incorporate the previous briefing in full, without shortening it, and add what the new history adds."
            } else if ratio < 0.85 {
                "Lightly condense the oldest sections of the previous briefing; keep everything else as it is."
            } else {
                "Condense the oldest, fully resolved parts of the previous briefing to a sentence or two; keep identifiers, decisions and unresolved items verbatim."
            };
            msg.push_str(&format!(
                "<previous-briefing>\n{}\n</previous-briefing>\n{hint}\n\n",
                prev.trim()
            ));
        }
        msg.push_str("<history>\n");
        msg.push_str(&history(req.region, &self.error_prefixes, self.input_chars));
        msg.push_str("</history>\n\n");
        if !req.tail.is_empty() {
            msg.push_str("These most recent steps stay in the conversation verbatim after your briefing. Read them, do not summarize them, and do not contradict them:\n<recent-steps>\n");
            msg.push_str(&history(req.tail, &self.error_prefixes, 8_000));
            msg.push_str("</recent-steps>\n\n");
        }
        msg.push_str(&format!(
            "Write the briefing now, in about {} tokens at most.",
            req.budget_tokens
        ));
        if let Some(focus) = req.focus {
            msg.push_str(&format!(
                "\n\nThe agent asked the briefing to focus on: {}",
                focus.trim()
            ));
        }
        if let Some(extra) = &self.instructions {
            msg.push_str("\n\nAdditional instructions:\n");
            msg.push_str(extra);
        }
        msg
    }

    fn request(&self, user: &str, max_tokens: u32) -> (String, Value, Vec<(&'static str, String)>) {
        match self.api {
            Api::OpenAi => {
                let mut headers = Vec::new();
                if let Some(k) = &self.key {
                    headers.push(("authorization", format!("Bearer {k}")));
                }
                let body = json!({
                    "model": self.model,
                    "messages": [{"role": "system", "content": self.prompt}, {"role": "user", "content": user}],
                    "temperature": 0.1,
                    "max_tokens": max_tokens,
                });
                (format!("{}/chat/completions", self.base_url), body, headers)
            }
            Api::Anthropic => {
                let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
                if let Some(k) = &self.key {
                    headers.push(("x-api-key", k.clone()));
                }
                let body = json!({
                    "model": self.model,
                    "system": self.prompt,
                    "messages": [{"role": "user", "content": user}],
                    "temperature": 0.1,
                    "max_tokens": max_tokens,
                });
                (format!("{}/v1/messages", self.base_url), body, headers)
            }
        }
    }

    /// Sends the request; retries once on 429 when `Retry-After` fits the time limit.
    fn call(&self, user: &str, max_tokens: u32) -> Result<String, SummarizeError> {
        TLS.call_once(|| {
            // Ignore "already installed": any installed ring/aws provider works.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let start = Instant::now();
        let (url, body, headers) = self.request(user, max_tokens);
        for attempt in 0..2 {
            let left = self.timeout.saturating_sub(start.elapsed());
            let client = reqwest::blocking::Client::builder()
                .timeout(left)
                .build()
                .map_err(|e| SummarizeError::Transport(e.to_string()))?;
            let mut rb = client.post(&url).json(&body);
            for (k, v) in &headers {
                rb = rb.header(*k, v);
            }
            let resp = rb.send().map_err(|e| self.transport(&e))?;
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok());
            let text = resp.text().map_err(|e| self.transport(&e))?;
            if status == 429
                && attempt == 0
                && let Some(wait) = retry_after
                && Duration::from_secs_f64(wait.max(0.0))
                    < self.timeout.saturating_sub(start.elapsed())
            {
                std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
                continue;
            }
            if status >= 400 {
                return Err(SummarizeError::Status {
                    status,
                    body: cut(text.trim(), 300),
                });
            }
            return self.parse(&text);
        }
        Err(SummarizeError::Status {
            status: 429,
            body: "still rate limited after one retry".into(),
        })
    }

    fn transport(&self, e: &reqwest::Error) -> SummarizeError {
        if e.is_timeout() {
            SummarizeError::Timeout(self.timeout.as_secs())
        } else {
            SummarizeError::Transport(e.to_string())
        }
    }

    /// The briefing text of a response body.
    fn parse(&self, text: &str) -> Result<String, SummarizeError> {
        if text.trim().is_empty() {
            return Err(SummarizeError::Malformed("empty response body".into()));
        }
        let v: Value = serde_json::from_str(text).map_err(|_| {
            SummarizeError::Malformed(format!("not JSON: {}", cut(text.trim(), 120)))
        })?;
        let out = match self.api {
            Api::OpenAi => v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Api::Anthropic => v.get("content").and_then(Value::as_array).map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
        };
        match out {
            Some(t) if !t.trim().is_empty() => Ok(t.trim().to_owned()),
            Some(_) => Err(SummarizeError::Rejected("empty briefing".into())),
            None => Err(SummarizeError::Malformed(format!(
                "no briefing text in the response: {}",
                cut(text.trim(), 120)
            ))),
        }
    }
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> String {
        format!("{}:{}", self.api.as_str(), self.model)
    }

    fn summarize(&self, req: &Request<'_>) -> Result<String, SummarizeError> {
        let user = self.user_message(req);
        let max = (req.budget_tokens as u32).clamp(256, self.max_output_tokens);
        self.call(&user, max)
    }
}
