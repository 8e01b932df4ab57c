//! The agent's task list, in whatever shape its tools write it: a whole
//! list per call — Claude Code's `TodoWrite` (`todos[].content`), Gemini
//! CLI's `write_todos` (`todos[].description`), Codex's `update_plan`
//! (`plan[].step`), a `reportProgress` list, a list of objects with a status
//! under any key, a Markdown checklist (`- [x] …`) in a task-list tool's
//! string argument — or one task per call, as Claude Code's `TaskCreate`
//! (its result names the new task's id) and `TaskUpdate` (`taskId`,
//! `status`) write it.

use serde_json::Value;

/// Keys that hold an item's text, most specific first.
const TEXT_KEYS: [&str; 8] = [
    "content",
    "step",
    "title",
    "task",
    "description",
    "text",
    "name",
    "subject",
];

/// Keys that hold an item's status as text.
const STATUS_KEYS: [&str; 3] = ["status", "state", "progress"];

/// Keys that hold an item's status as a flag.
const DONE_KEYS: [&str; 4] = ["done", "completed", "complete", "checked"];

/// How deep in the arguments a list is looked for.
const DEPTH: usize = 3;

/// Keys that name the task a one-task call changes.
const ID_KEYS: [&str; 4] = ["taskId", "task_id", "id", "todoId"];

/// One item of a task list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// What the item says.
    pub text: String,
    /// Its status as the agent wrote it (`completed`, `in_progress`, `done`…).
    pub status: String,
    /// Its id, when the agent's tools address tasks one by one.
    pub id: Option<String>,
}

impl Task {
    /// The agent marked it finished.
    pub fn done(&self) -> bool {
        is_done(&self.status)
    }

    /// `- [status] text`, or `- [status] #id text`.
    pub fn line(&self) -> String {
        match &self.id {
            Some(id) => format!("- [{}] #{id} {}", self.status, self.text),
            None => format!("- [{}] {}", self.status, self.text),
        }
    }
}

/// The status words that mean finished.
fn is_done(status: &str) -> bool {
    matches!(
        status.to_lowercase().replace([' ', '-'], "_").as_str(),
        "completed" | "complete" | "done" | "finished" | "x" | "true" | "resolved" | "closed"
    )
}

/// A task list as the agent last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskList {
    /// The tool that wrote it.
    pub tool: String,
    /// Its items; empty when the tool is a task-list tool whose arguments
    /// hold no list abridge reads (see [`args`](Self::args)).
    pub items: Vec<Task>,
    /// The call's arguments.
    pub args: Value,
}

impl TaskList {
    /// `- [status] text` lines, or the arguments' JSON when no item was read.
    pub fn lines(&self) -> Vec<String> {
        if self.items.is_empty() {
            vec![abridge_model::text::clip(&self.args.to_string(), 2_000, 0)]
        } else {
            self.items.iter().map(Task::line).collect()
        }
    }
}

/// The task list a call writes: when its tool is one of `named` (its
/// arguments may then also be a Markdown checklist), or its arguments hold
/// a list of objects with a text and a status under any key.
pub fn of_call(name: &str, args: &Value, named: &[String]) -> Option<TaskList> {
    let named = named.iter().any(|t| t == name);
    let items = find(args, DEPTH, named);
    match items {
        Some(items) if !items.is_empty() => Some(items),
        _ if named => Some(Vec::new()),
        _ => None,
    }
    .map(|items| TaskList {
        tool: name.to_owned(),
        items,
        args: args.clone(),
    })
}

/// What a call does to the agent's task list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The whole list, written again.
    Replace(TaskList),
    /// One task added (`TaskCreate`): its id is in the call's result.
    Create {
        /// The tool.
        tool: String,
        /// What the task says.
        text: String,
    },
    /// One task's status set (`TaskUpdate`); `deleted` removes it.
    Update {
        /// The task's id.
        id: String,
        /// Its new status.
        status: String,
    },
}

/// What a call of `name` with `args` does to the task list, if anything
/// (`named`: the configured task-list tools).
pub fn change_of(name: &str, args: &Value, named: &[String]) -> Option<Change> {
    if let Some(list) = of_call(name, args, named) {
        return Some(Change::Replace(list));
    }
    let words = crate::created::words(name);
    let has = |ws: &[&str]| words.iter().any(|w| ws.contains(&w.as_str()));
    if !has(&["task", "todo", "step"]) {
        return None;
    }
    if has(&["create", "add", "new"]) {
        let text = TEXT_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))?;
        return Some(Change::Create {
            tool: name.to_owned(),
            text: text.trim().to_owned(),
        });
    }
    if has(&["update", "set", "edit", "complete", "mark"]) {
        let id = ID_KEYS.iter().find_map(|k| match args.get(*k)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })?;
        let status = item(&json_with_text(args))?.status;
        return Some(Change::Update { id, status });
    }
    None
}

/// `args` with a placeholder text, so that [`item`] reads its status.
fn json_with_text(args: &Value) -> Value {
    let mut v = args.clone();
    if let Some(map) = v.as_object_mut() {
        map.insert("text".into(), Value::String("-".into()));
    }
    v
}

impl Change {
    /// Applies the change to `list`; a created task's id is read from the
    /// call's `result`.
    pub fn apply(self, list: &mut Option<TaskList>, result: &str) {
        match self {
            Change::Replace(l) => *list = Some(l),
            Change::Create { tool, text } => {
                let id = crate::created::ids(&format!("create_{tool}"), result)
                    .into_iter()
                    .next();
                let l = list.get_or_insert_with(|| TaskList {
                    tool: tool.clone(),
                    items: Vec::new(),
                    args: Value::Null,
                });
                l.items.push(Task {
                    text,
                    status: "pending".into(),
                    id,
                });
            }
            Change::Update { id, status } => {
                let Some(l) = list else { return };
                if status == "deleted" {
                    l.items.retain(|t| t.id.as_deref() != Some(&id));
                } else if let Some(t) = l.items.iter_mut().find(|t| t.id.as_deref() == Some(&id)) {
                    t.status = status;
                }
            }
        }
    }

    /// A change that needs the call's result (a created task's id).
    pub fn needs_result(&self) -> bool {
        matches!(self, Change::Create { .. })
    }
}

/// The first list of task items in `v`, shallowest first; checklists in
/// strings only when `strings`.
fn find(v: &Value, depth: usize, strings: bool) -> Option<Vec<Task>> {
    match v {
        Value::Array(items) => {
            let tasks: Vec<Task> = items.iter().filter_map(item).collect();
            (!tasks.is_empty() && tasks.len() * 2 >= items.len()).then_some(tasks)
        }
        Value::String(s) if strings => checklist(s),
        Value::Object(map) if depth > 0 => map
            .values()
            .filter(|v| v.is_array() || v.is_string())
            .find_map(|v| find(v, depth - 1, strings))
            .or_else(|| {
                map.values()
                    .filter(|v| v.is_object())
                    .find_map(|v| find(v, depth - 1, strings))
            }),
        _ => None,
    }
}

/// An item: an object with a text and a status.
fn item(v: &Value) -> Option<Task> {
    let text = TEXT_KEYS
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))?
        .trim();
    let status = STATUS_KEYS
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            DONE_KEYS.iter().find_map(|k| {
                v.get(*k)
                    .and_then(Value::as_bool)
                    .map(|d| if d { "completed" } else { "pending" }.to_owned())
            })
        })?;
    (!text.is_empty()).then(|| Task {
        text: text.to_owned(),
        status,
        id: None,
    })
}

/// A Markdown checklist (`- [ ] a`, `- [x] b`): its items, when every
/// non-empty line but a heading is one.
fn checklist(s: &str) -> Option<Vec<Task>> {
    let mut tasks = Vec::new();
    for line in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let rest = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .and_then(|l| l.strip_prefix('['));
        let Some(rest) = rest else {
            if line.starts_with('#') {
                continue;
            }
            return None;
        };
        let (mark, text) = rest.split_once(']')?;
        let status = match mark.trim() {
            "x" | "X" => "completed",
            "" => "pending",
            "-" | "~" => "in_progress",
            _ => return None,
        };
        tasks.push(Task {
            text: text.trim().to_owned(),
            status: status.to_owned(),
            id: None,
        });
    }
    (!tasks.is_empty()).then_some(tasks)
}

/// What a line of a briefing says of a task's status: `Some(true)` when it
/// marks it finished, `Some(false)` when open, `None` when it says neither.
pub fn status_claimed(line: &str) -> Option<bool> {
    let lower = line.to_lowercase();
    const OPEN: [&str; 8] = [
        "[ ]",
        "[pending]",
        "[in_progress]",
        "in progress",
        "in_progress",
        "pending",
        "not started",
        "not done",
    ];
    const DONE: [&str; 6] = ["[x]", "[completed]", "✓", "completed", "done", "finished"];
    if OPEN.iter().any(|w| lower.contains(w)) {
        Some(false)
    } else if DONE.iter().any(|w| lower.contains(w)) {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named() -> Vec<String> {
        crate::FactConfig::default().todo_tools
    }

    fn lines(name: &str, args: Value) -> Vec<String> {
        of_call(name, &args, &named())
            .map(|l| l.items.iter().map(Task::line).collect())
            .unwrap_or_default()
    }

    #[test]
    fn every_agents_shape_is_read_with_its_statuses() {
        // Claude Code.
        let claude = json!({"todos": [
            {"content": "Reproduce the bug", "status": "completed", "activeForm": "Reproducing"},
            {"content": "Fix rounding", "status": "in_progress", "activeForm": "Fixing"}]});
        assert_eq!(
            lines("TodoWrite", claude),
            [
                "- [completed] Reproduce the bug",
                "- [in_progress] Fix rounding"
            ]
        );
        // Gemini CLI.
        let gemini = json!({"todos": [{"description": "Write tests", "status": "cancelled"}]});
        assert_eq!(lines("write_todos", gemini), ["- [cancelled] Write tests"]);
        // Codex.
        let codex =
            json!({"explanation": "x", "plan": [{"step": "Run cargo test", "status": "pending"}]});
        assert_eq!(lines("update_plan", codex), ["- [pending] Run cargo test"]);
        // A reportProgress list with done flags, under a key of its own.
        let report = json!({"update": {"steps": [{"title": "Create ticket", "done": true}, {"title": "Notify", "done": false}]}});
        assert_eq!(
            lines("reportProgress", report),
            ["- [completed] Create ticket", "- [pending] Notify"]
        );
        // A Markdown checklist.
        let md = json!({"markdown": "## Plan\n- [x] Read the spec\n- [ ] Ship it"});
        assert_eq!(
            lines("reportProgress", md),
            ["- [completed] Read the spec", "- [pending] Ship it"]
        );
    }

    #[test]
    fn an_unnamed_tool_counts_only_by_its_shape() {
        let shaped = json!({"items": [{"name": "Migrate DB", "state": "done"}]});
        assert_eq!(lines("tracker", shaped), ["- [done] Migrate DB"]);
        assert!(of_call("search", &json!({"query": "status"}), &named()).is_none());
        // A list of records, most without a status, is not a task list.
        let rows = json!({"rows": [{"name": "a", "status": "x"}, {"name": "b"}, {"name": "c"}]});
        assert!(of_call("query", &rows, &named()).is_none());
        // A named tool whose list abridge does not read still counts.
        let raw = of_call("TodoWrite", &json!({"x": 1}), &named()).unwrap();
        assert!(raw.items.is_empty());
        assert_eq!(raw.lines(), [r#"{"x":1}"#]);
        // A checklist counts only in a task-list tool's arguments.
        let md = json!({"content": "- [ ] a\n- [x] b"});
        assert!(of_call("Write", &md, &named()).is_none());
        assert_eq!(
            of_call("reportProgress", &md, &named())
                .unwrap()
                .items
                .len(),
            2
        );
    }

    #[test]
    fn tasks_created_and_updated_one_by_one_make_a_list() {
        let mut list = None;
        let named = named();
        let calls = [
            (
                "TaskCreate",
                json!({"subject": "Add the helper", "activeForm": "Adding"}),
                "Task #1 created successfully: Add the helper",
            ),
            (
                "TaskCreate",
                json!({"subject": "Rewrite the flow"}),
                "Task #2 created successfully: Rewrite the flow",
            ),
            (
                "TaskCreate",
                json!({"subject": "Drop the flag"}),
                "Task #3 created successfully: Drop the flag",
            ),
            (
                "TaskUpdate",
                json!({"taskId": "1", "status": "completed"}),
                "Updated task #1 status",
            ),
            (
                "TaskUpdate",
                json!({"taskId": "2", "status": "in_progress"}),
                "Updated task #2 status",
            ),
            (
                "TaskUpdate",
                json!({"taskId": "3", "status": "deleted"}),
                "Updated task #3",
            ),
            ("Read", json!({"file_path": "src/a.rs"}), "fn a() {}"),
        ];
        for (name, args, result) in calls {
            if let Some(c) = change_of(name, &args, &named) {
                c.apply(&mut list, result);
            }
        }
        let lines: Vec<String> = list.unwrap().items.iter().map(Task::line).collect();
        assert_eq!(
            lines,
            [
                "- [completed] #1 Add the helper",
                "- [in_progress] #2 Rewrite the flow"
            ]
        );
    }

    #[test]
    fn a_line_says_done_open_or_neither() {
        assert_eq!(status_claimed("- [x] Read the spec"), Some(true));
        assert_eq!(status_claimed("Fix rounding (completed)"), Some(true));
        assert_eq!(status_claimed("- [ ] Ship it"), Some(false));
        assert_eq!(status_claimed("Fix rounding: in progress"), Some(false));
        assert_eq!(status_claimed("Fix rounding"), None);
    }
}
