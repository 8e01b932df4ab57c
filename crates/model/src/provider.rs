//! The providers abridge talks to, one row each: what the proxy's routes and
//! credential forwarding, the LLM summarizers' client, the configuration's
//! defaults and the metrics' labels read of a provider. A new provider is a
//! row here (and its wire's codec); an OpenAI-compatible server needs no
//! code at all, only a base URL.

use crate::conversation::{Family, Wire};

/// An upstream provider: one base URL, one kind of credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// OpenAI and every OpenAI-compatible server (Chat Completions, Responses).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google's Gemini API (`generateContent` and the rest of its family).
    Gemini,
}

/// What abridge knows of a provider.
#[derive(Debug)]
pub struct ProviderFacts {
    /// Its name in logs, metric labels, configuration and on the command line.
    pub name: &'static str,
    /// The structure its conversations follow.
    pub family: Family,
    /// Its name in OpenTelemetry's GenAI conventions (`gen_ai.provider.name`).
    pub otel_name: &'static str,
    /// The request bodies it takes, the first the one abridge writes to it.
    pub wires: &'static [Wire],
    /// The base URL when none is configured (OpenAI's ends in `/v1`; the
    /// others are the host root, their paths say the version).
    pub default_base: &'static str,
    /// The part of a request's path its base URL already holds (OpenAI's
    /// base ends in `/v1`: `/v1/chat/completions` goes to
    /// `{base}/chat/completions`).
    pub base_path: &'static str,
    /// The `[serve]` key (and, with dashes, the `abridge serve` flag) that
    /// names its upstream.
    pub upstream_key: &'static str,
    /// The environment variable its API key is read from by default.
    pub key_variable: &'static str,
    /// The header its API key goes in, and what precedes the key there.
    pub key_header: (&'static str, &'static str),
    /// Credential headers only this provider takes: the proxy sends them to
    /// it and to no other. (`authorization` is every provider's.)
    pub own_credentials: &'static [&'static str],
    /// A query parameter its API takes the key in, if any.
    pub key_param: Option<&'static str>,
    /// Headers every request to it carries, when the caller sets none.
    pub fixed_headers: &'static [(&'static str, &'static str)],
}

const TABLE: [ProviderFacts; 3] = [
    ProviderFacts {
        name: "openai",
        family: Family::OpenAi,
        otel_name: "openai",
        wires: &[Wire::Chat, Wire::Responses],
        default_base: "https://api.openai.com/v1",
        base_path: "/v1",
        upstream_key: "openai_upstream",
        key_variable: "OPENAI_API_KEY",
        key_header: ("authorization", "Bearer "),
        // Azure OpenAI's key header.
        own_credentials: &["api-key"],
        key_param: None,
        fixed_headers: &[],
    },
    ProviderFacts {
        name: "anthropic",
        family: Family::Anthropic,
        otel_name: "anthropic",
        wires: &[Wire::Anthropic],
        default_base: "https://api.anthropic.com",
        base_path: "",
        upstream_key: "anthropic_upstream",
        key_variable: "ANTHROPIC_API_KEY",
        key_header: ("x-api-key", ""),
        own_credentials: &["x-api-key"],
        key_param: None,
        fixed_headers: &[("anthropic-version", "2023-06-01")],
    },
    ProviderFacts {
        name: "gemini",
        family: Family::Gemini,
        otel_name: "gcp.gemini",
        wires: &[Wire::Gemini],
        default_base: "https://generativelanguage.googleapis.com",
        base_path: "",
        upstream_key: "gemini_upstream",
        key_variable: "GEMINI_API_KEY",
        key_header: ("x-goog-api-key", ""),
        own_credentials: &["x-goog-api-key"],
        key_param: Some("key"),
        fixed_headers: &[],
    },
];

impl Provider {
    /// Every provider, in the table's order.
    pub const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::Gemini];

    /// Its row of the table.
    pub fn facts(self) -> &'static ProviderFacts {
        &TABLE[self as usize]
    }

    /// Its name (`openai`, `anthropic`, `gemini`).
    pub fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// The provider a request body of `wire` goes to: the row that lists
    /// it, else (the AI SDK's messages, sent by the SDK's own provider
    /// package) the provider of its family.
    pub fn of_wire(wire: Wire) -> Provider {
        Provider::ALL
            .into_iter()
            .find(|p| p.facts().wires.contains(&wire))
            .unwrap_or_else(|| Provider::from(wire.family()))
    }
}

impl From<Family> for Provider {
    fn from(family: Family) -> Provider {
        match family {
            Family::OpenAi => Provider::OpenAi,
            Family::Anthropic => Provider::Anthropic,
            Family::Gemini => Provider::Gemini,
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    /// A provider by its name (`openai`, `anthropic`, `gemini`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!("unknown provider \"{s}\" (expected openai, anthropic or gemini)")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_its_providers_and_every_wire_has_one_provider() {
        for (i, p) in Provider::ALL.into_iter().enumerate() {
            assert_eq!(p as usize, i, "the table is indexed by the enum");
            let f = p.facts();
            assert_eq!(Provider::from(f.family), p, "{}", f.name);
            assert!(f.default_base.starts_with("https://"), "{}", f.name);
            assert_eq!(f.upstream_key, format!("{}_upstream", f.name));
            for w in f.wires {
                assert_eq!(Provider::of_wire(*w), p, "{w}");
                assert_eq!(w.family(), f.family, "{w}");
            }
            // A credential header is one provider's alone.
            for h in f.own_credentials {
                let owners = Provider::ALL
                    .iter()
                    .filter(|o| o.facts().own_credentials.contains(h))
                    .count();
                assert_eq!(owners, 1, "{h}");
            }
        }
        // Every request body abridge writes, except the AI SDK's (an
        // in-process format, sent by the SDK's own provider package), has
        // its provider's row.
        for w in Wire::ALL.into_iter().filter(|w| *w != Wire::AiSdk) {
            assert!(Provider::of_wire(w).facts().wires.contains(&w), "{w}");
        }
        assert!(
            Provider::ALL
                .iter()
                .all(|p| !p.facts().own_credentials.contains(&"authorization"))
        );
    }
}
