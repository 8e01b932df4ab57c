//! The metrics' labels: closed sets of values and the label sets built of
//! them. Never a session id, header or credential.

use std::fmt::Write as _;

use abridge::model::Wire;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

/// A closed set of label values, written in snake case (`route="chat_completions"`).
macro_rules! label_values {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
        pub(crate) enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The label value.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
                encoder.write_str(self.as_str())
            }
        }
    };
}

/// Which endpoint a request went to: the wire of a conversation request,
/// or none for what was forwarded untouched (`route="other"`).
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) struct Route(pub(crate) Option<Wire>);

impl Route {
    /// Anything but a conversation request.
    pub(crate) const OTHER: Route = Route(None);

    /// The label value: the endpoint's name (`chat_completions` for
    /// `POST /v1/chat/completions`, `messages` for Anthropic's).
    pub(crate) fn as_str(self) -> &'static str {
        match self.0 {
            Some(Wire::Chat) => "chat_completions",
            Some(Wire::Responses) => "responses",
            Some(Wire::Anthropic) => "messages",
            Some(Wire::Gemini) => "gemini",
            // The AI SDK's messages have no endpoint of their own.
            Some(Wire::AiSdk) | None => "other",
        }
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.as_str())
    }
}

label_values! {
    /// Why a request was forwarded as the client sent it.
    Passthrough {
        /// Under every trigger, nothing carried over.
        Unchanged => "unchanged",
        /// Not JSON, or not a conversation the proxy understands.
        Undecodable => "undecodable",
        /// The provider's own compaction or context editing is in charge.
        ProviderNative => "provider_native",
        /// The history is held by the provider (a Responses request that
        /// names a `previous_response_id` or a `conversation`): the body
        /// holds only what is new.
        ServerState => "server_state",
        /// A path abridge does not model (a provider's other endpoints,
        /// the Gemini API), forwarded to its provider's upstream.
        Unmodeled => "unmodeled",
    }
}

label_values! {
    /// How much of a conversation request was decoded.
    Decoded {
        /// The whole body (a session's first request, or one that does not
        /// extend the last).
        Whole => "whole",
        /// Only the messages added since the session's last request.
        Added => "added",
    }
}

label_values! {
    /// What a wait on the store was for.
    StoreOp {
        /// A session's stored version or record.
        Read => "read",
        /// A session's save, or a snapshot whose id goes into a report.
        Write => "write",
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreLabels {
    pub(super) op: StoreOp,
}

label_values! {
    /// What gave way when the store could not keep up (a session's state
    /// never does).
    Dropped {
        /// The oldest snapshot waiting to be written.
        Snapshot => "snapshot",
        /// The oldest request log row waiting.
        Request => "request_row",
    }
}

label_values! {
    /// Why a trace span was never delivered.
    SpanLoss {
        /// The export queue was full when the span ended.
        QueueFull => "queue_full",
        /// The receiver refused it or could not be reached.
        ExportFailed => "export_failed",
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SpanLossLabels {
    pub(super) why: SpanLoss,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DroppedLabels {
    pub(super) what: Dropped,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DecodedLabels {
    pub(super) part: Decoded,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RequestLabels {
    pub(super) route: Route,
    pub(super) status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PassLabels {
    pub(super) why: Passthrough,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ProviderLabels {
    pub(super) provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RungLabels {
    pub(super) rung: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: String,
}
