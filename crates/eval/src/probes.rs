//! Probe questions, in the style of Factory's evaluation: a model writes
//! questions about the history (a fact, the files changed, the next step,
//! the reason for a decision) with reference answers from the full
//! history; each strategy's compacted history answers them; a judge grades
//! each answer against the reference from 0 to 5.

use abridge::model::{Conversation, Message, encode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A language model: a system prompt and a user message in, text out.
pub trait Llm: Sync {
    /// The completion, or why there is none.
    fn complete(&self, system: &str, user: &str) -> Result<String, String>;
}

/// What a probe asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// A fact with its exact value (an id, a path, a number).
    Fact,
    /// Which files changed.
    Files,
    /// What the agent was about to do.
    Next,
    /// Why a decision was made.
    Decision,
}

/// One question and the answer the full history gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// What it asks about.
    pub kind: ProbeKind,
    /// The question.
    pub question: String,
    /// The answer from the full history.
    pub reference: String,
}

const WRITE: &str = "You write probe questions to test whether a shortened agent history still lets the agent continue. \
Reply with only a JSON array of four objects {\"kind\", \"question\", \"answer\"}, one per kind: \
\"fact\" (an exact identifier, path or value), \"files\" (which files were changed), \
\"next\" (what the agent was about to do), \"decision\" (why a choice was made). \
Answers come from the history given.";

const ANSWER: &str = "Answer each question from the agent history given, and from nothing else. \
If the history does not say, answer \"unknown\". Reply with only a JSON array of strings, one answer per question, in order.";

const GRADE: &str = "Grade each answer against its reference answer: 5 = same facts, 0 = wrong or unknown. \
Reply with only a JSON array of integers from 0 to 5, one per answer, in order.";

/// Characters of history sent with a question (the newest are kept).
const HISTORY_CHARS: usize = 200_000;

fn history(conv: &Conversation) -> String {
    let text = encode(conv).map(|v| v.to_string()).unwrap_or_default();
    let start = text.len().saturating_sub(HISTORY_CHARS);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    text[start..].to_owned()
}

/// The first JSON array in `text` (models wrap it in prose or fences).
fn array(text: &str) -> Result<Vec<Value>, String> {
    let (a, b) = (text.find('['), text.rfind(']'));
    let (Some(a), Some(b)) = (a, b) else {
        return Err(format!(
            "no JSON array in the reply: {}",
            abridge::model::text::clip(text, 120, 0)
        ));
    };
    serde_json::from_str(&text[a..=b]).map_err(|e| format!("the reply's array does not parse: {e}"))
}

/// Four probes about the history before a cut (`pre`), with what came
/// after it (`after`) to tell the next step.
pub(crate) fn write(
    llm: &dyn Llm,
    pre: &Conversation,
    after: &[Message],
) -> Result<Vec<Probe>, String> {
    let next: String = after
        .iter()
        .take(4)
        .map(Message::text_content)
        .collect::<Vec<_>>()
        .join("\n");
    let user = format!(
        "<history>\n{}\n</history>\n<what-came-next>\n{}\n</what-came-next>",
        history(pre),
        abridge::model::text::clip(&next, 4_000, 0)
    );
    let items = array(&llm.complete(WRITE, &user)?)?;
    let probes: Vec<Probe> = items
        .into_iter()
        .filter_map(|v| {
            Some(Probe {
                kind: serde_json::from_value(v.get("kind")?.clone()).ok()?,
                question: v.get("question")?.as_str()?.to_owned(),
                reference: v.get("answer")?.as_str()?.to_owned(),
            })
        })
        .collect();
    if probes.is_empty() {
        return Err("the model wrote no usable probe".into());
    }
    Ok(probes)
}

/// The mean grade (0–1) of `conv`'s answers to `probes`.
pub(crate) fn score(llm: &dyn Llm, probes: &[Probe], conv: &Conversation) -> Result<f64, String> {
    let questions: Vec<&str> = probes.iter().map(|p| p.question.as_str()).collect();
    let user = format!(
        "<history>\n{}\n</history>\nQuestions: {}",
        history(conv),
        serde_json::to_string(&questions).unwrap_or_default()
    );
    let answers = array(&llm.complete(ANSWER, &user)?)?;
    let pairs: Vec<Value> = probes
        .iter()
        .zip(&answers)
        .map(|(p, a)| serde_json::json!({"question": p.question, "reference": p.reference, "answer": a}))
        .collect();
    let grades = array(&llm.complete(GRADE, &Value::Array(pairs).to_string())?)?;
    let grades: Vec<f64> = grades
        .iter()
        .filter_map(Value::as_f64)
        .map(|g| g.clamp(0.0, 5.0))
        .collect();
    if grades.len() != probes.len() {
        return Err(format!(
            "the judge graded {} of {} answers",
            grades.len(),
            probes.len()
        ));
    }
    Ok(grades.iter().sum::<f64>() / (5.0 * grades.len() as f64))
}
