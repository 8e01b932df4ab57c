//! LLM summarizers over plain HTTP: async, one pooled client each (reqwest,
//! rustls with ring).

use std::sync::Once;
use std::time::{Duration, Instant};

use abridge::SummarizerSpec;
use abridge_model::Usage;
use abridge_model::text::clip;
use abridge_model::{Family, Provider};
use abridge_summarize::{AsyncSummarizer, BoxFuture, Briefing, Request, SummarizeError};
use serde_json::{Value, json};

use crate::serialize::{history, task_list};

/// The default prompt (`prompt.md`), reviewed as text.
pub const DEFAULT_PROMPT: &str = include_str!("prompt.md");

/// Default base URL: OpenAI's ends in `/v1`; Anthropic's and Gemini's are
/// the host root.
pub(crate) fn default_base_url(family: Family) -> &'static str {
    Provider::from(family).facts().default_base
}

/// Environment variable holding the API key when none is named.
pub(crate) fn default_key_variable(family: Family) -> &'static str {
    Provider::from(family).facts().key_variable
}

/// A summarizer backed by an LLM. Its HTTP client (and connection pool) is
/// built once and reused by every attempt.
#[derive(Debug, Clone)]
pub struct LlmSummarizer {
    family: Family,
    model: String,
    base_url: String,
    key: Key,
    timeout: Duration,
    max_output_tokens: u32,
    prompt: String,
    instructions: Option<String>,
    input_chars: usize,
    http: Result<reqwest::Client, String>,
}

/// Where the API key comes from.
#[derive(Clone)]
enum Key {
    Value(Option<String>),
    /// A variable the config named but the environment does not set.
    Missing(String),
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a credential.
        match self {
            Key::Value(Some(_)) => f.write_str("Key(set)"),
            Key::Value(None) => f.write_str("Key(none)"),
            Key::Missing(var) => write!(f, "Key(missing ${var})"),
        }
    }
}

static TLS: Once = Once::new();

/// A `reqwest` client builder with rustls (ring) ready: what every HTTP
/// client of abridge starts from.
pub fn client_builder() -> reqwest::ClientBuilder {
    TLS.call_once(|| {
        // Ignore "already installed": any installed ring/aws provider works.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

fn http_client() -> Result<reqwest::Client, String> {
    client_builder()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

impl LlmSummarizer {
    /// A summarizer for `model` with the default base URL, the key from the
    /// API's environment variable (none is fine for local servers), a 30 s
    /// timeout and the default prompt.
    pub fn new(family: Family, model: impl Into<String>) -> Self {
        LlmSummarizer {
            family,
            model: model.into(),
            base_url: default_base_url(family).to_owned(),
            key: Key::Value(env_key(default_key_variable(family))),
            timeout: Duration::from_secs(30),
            max_output_tokens: 8_000,
            prompt: DEFAULT_PROMPT.to_owned(),
            instructions: None,
            input_chars: 400_000,
            http: http_client(),
        }
    }

    /// The summarizer a `[[summarizers]]` entry declares. A key variable
    /// the entry names but the environment lacks makes every attempt fail
    /// with `NotConfigured`, so the cascade moves on and the report says why.
    pub fn from_spec(spec: &SummarizerSpec) -> Self {
        let mut s = LlmSummarizer::new(spec.kind, spec.model.clone())
            .timeout(Duration::from_secs_f64(spec.timeout_secs.max(0.001)))
            .instructions(spec.instructions.clone());
        if let Some(url) = &spec.base_url {
            s = s.base_url(url.clone());
        }
        if let Some(p) = &spec.prompt {
            s = s.prompt(p.clone());
        }
        if let Some(var) = &spec.api_key_env {
            s.key = match env_key(var) {
                Some(k) => Key::Value(Some(k)),
                None => Key::Missing(var.clone()),
            };
        }
        s
    }

    /// Sets the base URL (OpenAI-compatible: ending in `/v1`; Anthropic: the host root).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the API key.
    pub fn key(mut self, key: Option<String>) -> Self {
        self.key = Key::Value(key);
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
        let mut msg = format!(
            "Task as the user gave it (it stays in the conversation verbatim, above your briefing: do not restate it):\n{}\n\n",
            req.task.trim()
        );
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
        msg.push_str(&history(req.region, req.facts, self.input_chars));
        msg.push_str("</history>\n\n");
        if let Some(list) = task_list(req) {
            msg.push_str("The agent's task list as it stands at the end of this history, each item with the status the agent gave it (a change in the recent steps below is newer). Keep every item with its status:\n<task-list>\n");
            for line in list.lines() {
                msg.push_str(&line);
                msg.push('\n');
            }
            msg.push_str("</task-list>\n\n");
        }
        if !req.tail.is_empty() {
            msg.push_str("These most recent steps stay in the conversation verbatim after your briefing. Read them, do not summarize them, and do not contradict them:\n<recent-steps>\n");
            msg.push_str(&history(req.tail, req.facts, 8_000));
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

    /// URL, body and headers of the request for this API.
    fn request(
        &self,
        system: &str,
        user: &str,
        max_tokens: u32,
    ) -> Result<(String, Value, Headers), SummarizeError> {
        let key = match &self.key {
            Key::Value(k) => k.as_deref(),
            Key::Missing(var) => {
                return Err(SummarizeError::NotConfigured(format!(
                    "environment variable {var} is not set"
                )));
            }
        };
        let facts = Provider::from(self.family).facts();
        let mut headers: Headers = facts
            .fixed_headers
            .iter()
            .map(|(h, v)| (*h, (*v).to_owned()))
            .collect();
        if let Some(k) = key {
            let (header, scheme) = facts.key_header;
            headers.push((header, format!("{scheme}{k}")));
        }
        let (url, body) = match self.family {
            Family::OpenAi => {
                let body = json!({
                    "model": self.model,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    "temperature": 0.1,
                    "max_tokens": max_tokens,
                });
                (format!("{}/chat/completions", self.base_url), body)
            }
            Family::Anthropic => {
                let body = json!({
                    "model": self.model,
                    "system": system,
                    "messages": [{"role": "user", "content": user}],
                    "temperature": 0.1,
                    "max_tokens": max_tokens,
                });
                (format!("{}/v1/messages", self.base_url), body)
            }
            Family::Gemini => {
                let body = json!({
                    "systemInstruction": {"parts": [{"text": system}]},
                    "contents": [{"role": "user", "parts": [{"text": user}]}],
                    "generationConfig": {"temperature": 0.1, "maxOutputTokens": max_tokens},
                });
                let url = format!(
                    "{}/v1beta/models/{}:generateContent",
                    self.base_url, self.model
                );
                (url, body)
            }
        };
        Ok((url, body, headers))
    }

    /// Sends the request; retries once on 429 when `Retry-After` fits the time limit.
    /// One completion with another system prompt than the summarizer's:
    /// the same client, key, time limit and retry (used by `abridge eval`'s
    /// probe questions and judge).
    pub async fn complete(
        &self,
        system: &str,
        user: &str,
        max_tokens: u32,
    ) -> Result<String, SummarizeError> {
        Ok(self.call(system, user, max_tokens).await?.0)
    }

    /// The reply's text, and its usage as the provider reported it.
    async fn call(
        &self,
        system: &str,
        user: &str,
        max_tokens: u32,
    ) -> Result<(String, Option<Usage>), SummarizeError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| SummarizeError::Transport(e.clone()))?;
        let start = Instant::now();
        let (url, body, headers) = self.request(system, user, max_tokens)?;
        for attempt in 0..2 {
            let left = self.timeout.saturating_sub(start.elapsed());
            let mut rb = http.post(&url).timeout(left).json(&body);
            for (k, v) in &headers {
                rb = rb.header(*k, v);
            }
            let resp = rb.send().await.map_err(|e| self.transport(&e))?;
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|s| Duration::from_secs_f64(s.max(0.0)));
            let text = resp.text().await.map_err(|e| self.transport(&e))?;
            if status == 429
                && attempt == 0
                && let Some(wait) = retry_after
                && wait < self.timeout.saturating_sub(start.elapsed())
            {
                tokio::time::sleep(wait).await;
                continue;
            }
            if status >= 400 {
                return Err(SummarizeError::Status {
                    status,
                    body: clip(text.trim(), 300, 0),
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

    /// The briefing text of a response body, and the usage it reports.
    fn parse(&self, text: &str) -> Result<(String, Option<Usage>), SummarizeError> {
        if text.trim().is_empty() {
            return Err(SummarizeError::Malformed("empty response body".into()));
        }
        let v: Value = serde_json::from_str(text).map_err(|_| {
            SummarizeError::Malformed(format!("not JSON: {}", clip(text.trim(), 120, 0)))
        })?;
        let out = match self.family {
            Family::OpenAi => v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Family::Anthropic => v.get("content").and_then(Value::as_array).map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
            // The answer's text parts; thoughts (`thought: true`) are not it.
            Family::Gemini => v
                .pointer("/candidates/0/content/parts")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter(|p| p.get("thought") != Some(&Value::Bool(true)))
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("")
                }),
        };
        let usage = match self.family {
            Family::OpenAi => v.get("usage").map(Usage::from_openai),
            Family::Anthropic => v.get("usage").map(Usage::from_anthropic),
            Family::Gemini => v.get("usageMetadata").map(Usage::from_gemini),
        };
        match out {
            Some(t) if !t.trim().is_empty() => Ok((t.trim().to_owned(), usage)),
            Some(_) => Err(SummarizeError::Rejected("empty briefing".into())),
            None => Err(SummarizeError::Malformed(format!(
                "no briefing text in the response: {}",
                clip(text.trim(), 120, 0)
            ))),
        }
    }
}

type Headers = Vec<(&'static str, String)>;

fn env_key(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|k| !k.is_empty())
}

/// The tags the user message wraps its parts in: a reply holding one copied
/// its input.
const SCAFFOLDING: [&str; 4] = ["previous-briefing", "history", "recent-steps", "task-list"];

impl AsyncSummarizer for LlmSummarizer {
    fn name(&self) -> String {
        format!("{}:{}", self.family, self.model)
    }

    fn summarize<'a>(
        &'a self,
        req: &'a Request<'a>,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        Box::pin(async move {
            let text = self.brief(req).await?.text;
            match self.rejects(&text) {
                Some(why) => Err(SummarizeError::Rejected(why)),
                None => Ok(text),
            }
        })
    }

    /// A reply that copied a block of its prompt instead of writing a
    /// briefing.
    fn rejects(&self, text: &str) -> Option<String> {
        SCAFFOLDING
            .iter()
            .find(|t| text.contains(&format!("<{t}>")))
            .map(|tag| format!("holds the prompt's <{tag}> block"))
    }

    fn brief<'a>(
        &'a self,
        req: &'a Request<'a>,
    ) -> BoxFuture<'a, Result<Briefing, SummarizeError>> {
        Box::pin(async move {
            let user = self.user_message(req);
            let max = (req.budget_tokens as u32).clamp(256, self.max_output_tokens);
            let (text, usage) = self.call(&self.prompt, &user, max).await?;
            Ok(Briefing {
                text,
                sheet: None,
                usage,
            })
        })
    }
}
