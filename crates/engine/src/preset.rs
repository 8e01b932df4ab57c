//! Presets: the numbers and behaviours of each design abridge began from,
//! as a base under a config (`preset = "…"`; every key the config sets
//! itself still wins). The seeds are quoted in the book's page on presets.

use crate::error::{Error, Result};

/// A named base config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// What `preset = "…"` and `--preset` take.
    pub name: &'static str,
    /// The design it reproduces.
    pub source: &'static str,
    /// Its keys, as TOML.
    pub toml: &'static str,
}

/// Every preset.
pub const PRESETS: [Preset; 5] = [
    Preset {
        name: "pilo-clipping",
        source: "Pilo #437, aggressive history clipping for long task runs",
        // Before every step: old page snapshots, tool arguments and results
        // clipped to placeholders whatever their size (arguments blanked,
        // the text beside old calls stripped), runs of old feedback
        // collapsed, the last K = 3 iterations whole. No summary.
        toml: r#"
[trigger]
every_iterations = 1
[budget]
target_tokens = 1
clear_at_least = 0
min_iterations = 3
kept_fraction = 0.0
kept_cap = 0
[policies]
pipeline = ["clip_external", "collapse_feedback", "clip_tool_results", "clip_tool_args"]
min_result_chars = 0
min_args_chars = 0
strip_reasoning = true
blank_args = true
"#,
    },
    Preset {
        name: "pilo-compaction",
        source: "Pilo #441, LLM-based history compaction for long tasks",
        // Every K = 25 iterations or above T = 40,000 tokens, the history
        // between the task and the last 6 iterations becomes one summary of
        // at most 2,000 tokens in <compacted-history>; when the summarizer
        // fails, the compaction is skipped and the full history goes on.
        toml: r#"
[trigger]
every_iterations = 25
max_tokens = 40000
[budget]
summarize_all = true
clear_at_least = 0
min_iterations = 6
[policies]
pipeline = ["summarize"]
[summary]
offline = false
skip_on_failure = true
max_tokens = 2000
wrapper = "compacted-history"
result_lines = false
"#,
    },
    Preset {
        name: "mycoder",
        source: "mycoder's token tracking, status updates and compactHistory tool",
        // The agent decides: a status note every 5 iterations (tokens of
        // the window, cost so far, the tool suggested above 70%) and the
        // compactHistory tool (10 recent messages kept unless it says
        // otherwise, 1 to 50, an optional custom prompt). No trigger fires
        // by itself.
        toml: r#"
[agent]
status_every = 5
compact_tool = true
tool = "compactHistory"
hint_at = 0.7
only_on_request = true
"#,
    },
    Preset {
        name: "compaction-note",
        source: "Context compaction for long conversations (design note)",
        // Above 60k tokens, a summary that keeps entity ids and the latest
        // reportProgress list replaces all but the last messages (at least
        // 10, five iterations of a call and its result).
        toml: r#"
[trigger]
max_tokens = 60000
[budget]
summarize_all = true
min_iterations = 5
[policies]
pipeline = ["summarize"]
[summary]
todo_tools = ["reportProgress", "TodoWrite", "todo_write", "write_todos", "update_plan"]
result_lines = false
"#,
    },
    Preset {
        name: "stagewise",
        source: "stagewise's history compression",
        // Above min(0.65 x window, 200k); the kept tail at most
        // min(0.2 x window, 40k) and at least max(5, 10) messages; a
        // briefing of about 30,000 characters (7,500 tokens); the agent's
        // own model last in the cascade.
        toml: r#"
[trigger]
window_fraction = 0.65
window_cap = 200000
[budget]
kept_fraction = 0.2
kept_cap = 40000
min_iterations = 3
min_messages = 10
[summary]
max_tokens = 7500
agent_model_last = true
"#,
    },
];

/// The preset named `name`.
pub fn find(name: &str) -> Result<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        Error::Config(format!(
            "preset: no preset {name:?}; there are {}",
            names.join(", ")
        ))
    })
}

/// `table` over the preset it names (its `preset` key, removed), keys of
/// `table` winning; `table` itself when it names none.
pub(crate) fn apply(mut table: toml::Table) -> Result<toml::Table> {
    let Some(name) = table.remove("preset") else {
        return Ok(table);
    };
    let Some(name) = name.as_str() else {
        return Err(Error::Config(format!("preset: must be a name, not {name}")));
    };
    let mut base: toml::Table = toml::from_str(find(name)?.toml)
        .map_err(|e| Error::Config(format!("preset {name}: {e}")))?;
    merge(&mut base, table);
    Ok(base)
}

/// Puts `over` into `base`: tables merge key by key, anything else
/// (arrays included) replaces.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// A config's TOML `text` with `name` as its preset (`--preset`: it takes
/// the place of the file's own `preset` key), or `text` as it is.
pub fn named(text: &str, name: Option<&str>) -> Result<String> {
    let Some(name) = name else {
        return Ok(text.to_owned());
    };
    find(name)?;
    let mut table: toml::Table = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
    table.insert("preset".into(), toml::Value::String(name.to_owned()));
    toml::to_string(&table).map_err(|e| Error::Config(e.to_string()))
}
