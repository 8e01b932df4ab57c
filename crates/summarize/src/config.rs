//! What the fact extractor recognises, configured.

/// What the extractor recognises.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FactConfig {
    /// Tools whose latest call holds the agent's task list.
    pub todo_tools: Vec<String>,
    /// Result first-line prefixes that mean failure.
    pub error_prefixes: Vec<String>,
    /// Tag around briefings: an earlier briefing is not a user message.
    pub wrapper: String,
}

impl Default for FactConfig {
    fn default() -> Self {
        FactConfig {
            todo_tools: [
                "TodoWrite",
                "todo_write",
                "write_todos",
                "reportProgress",
                "update_plan",
            ]
            .map(str::to_owned)
            .to_vec(),
            error_prefixes: crate::outcome::DEFAULT_ERROR_PREFIXES
                .map(str::to_owned)
                .to_vec(),
            wrapper: crate::wrapper::DEFAULT_WRAPPER.to_owned(),
        }
    }
}
