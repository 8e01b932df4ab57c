//! What an API implements for the proxy to answer the recall tool on it.
//! The rounds themselves (answering, resending, summing the usage, ending
//! when the calls or the rounds run out) are the drivers' (`whole`,
//! `stream`); an API says only how its responses and requests are shaped.

use abridge::model::{Message, Usage, Wire, encode_wire_messages};
use abridge::recall::Answer;
use axum::body::Bytes;
use serde_json::Value;

use super::{Call, Ours};

/// One API's shapes: where a response's recall calls are, what a round
/// shows the client, how a request continues with the answers, and its
/// stream, round after round.
pub(super) trait Api: Send + 'static {
    /// The wire its requests are written in; continuations are encoded
    /// in it by the model's codecs.
    const WIRE: Wire;
    /// The field of a whole response that reports its usage.
    const USAGE: &'static str = "usage";
    /// What the earlier rounds of a whole response leave for the client.
    type Earlier: Default + Send;
    /// The client's stream.
    type Stream: Round;

    /// A usage report (the object at [`Api::USAGE`]) read.
    fn usage(report: &Value) -> Usage;

    /// A response that came as a JSON array of stream chunks, as one
    /// response; `None` where the API sends no such thing.
    fn gather(chunks: Vec<Value>) -> Option<Value> {
        let _ = chunks;
        None
    }

    /// The recall calls of a whole response.
    fn calls(response: &Value, tool: &Ours) -> Vec<Call>;

    /// Keeps what a round that recalled shows the client; returns the
    /// model's turn as it continues the request: its text and thinking,
    /// and its recall calls only.
    fn take(earlier: &mut Self::Earlier, response: &Value, tool: &Ours) -> Value;

    /// The last response as the client gets it: the earlier rounds' text
    /// before its own, its recall calls gone. `note` stands in for a
    /// response left with nothing to say.
    fn merge(earlier: Self::Earlier, response: Value, tool: &Ours, note: &str) -> Value;

    /// The answers, as the messages that follow the model's turn.
    fn results(answers: &[(String, Answer)]) -> Vec<Message>;

    /// Appends the model's turn and the answers to a request body.
    fn continue_with(
        body: &mut Value,
        turn: Value,
        answers: &[(String, Answer)],
    ) -> abridge::model::Result<()> {
        let results = encode_wire_messages(Self::WIRE, &Self::results(answers), 0)?;
        if let Some(history) = body
            .get_mut(Self::WIRE.history_key())
            .and_then(Value::as_array_mut)
        {
            history.push(turn);
            history.extend(results);
        }
        Ok(())
    }

    /// The stream's first round, for a tool of that name.
    fn stream(tool: &Ours) -> Self::Stream;
}

/// One API's stream, round after round.
pub(super) trait Round: Send {
    /// What the client gets of one upstream event.
    fn event(&mut self, name: Option<&str>, data: &str) -> Vec<Bytes>;
    /// The recall calls of the round that ended.
    fn recall_calls(&self) -> Vec<Call>;
    /// The model's turn as it continues: its text and its recall calls.
    fn turn(&self) -> Value;
    /// Starts the next round.
    fn next_round(&mut self);
    /// The end of the client's stream: the held tool calls (recall calls
    /// left out), the stop and the usage summed; `note` when nothing was said.
    fn finish(&mut self, note: &str) -> Vec<Bytes>;
}

/// One event: its name when it has one, its data (JSON, or a line that did
/// not parse, passed as it came).
pub(super) fn sse(name: Option<&str>, data: &impl std::fmt::Display) -> Bytes {
    Bytes::from(match name {
        Some(n) => format!("event: {n}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    })
}

/// The calls of the recall tool among function calls whose arguments are
/// JSON text (OpenAI's APIs): `(id, name, arguments)`.
pub(super) fn text_calls<'a>(
    calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    tool: &Ours,
) -> Vec<Call> {
    calls
        .into_iter()
        .filter(|(_, name, _)| tool.owns(name))
        .map(|(id, name, arguments)| Call {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: serde_json::from_str(arguments).unwrap_or(Value::Null),
        })
        .collect()
}
