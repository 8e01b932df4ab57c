//! The cascade declared in `[[summarizers]]`, the configured fact settings
//! reaching the LLM, and the blocking facade used from inside a runtime.

use abridge::model::{Family, validate};
use abridge::{Compactor, Config};
use abridge_llm::cascade;

use crate::providers::{BRIEFING, conversation};
use abridge_testkit::{Mock, Reply, openai_ok};

fn config(url: &str, extra: &str) -> Config {
    Config::from_toml(&format!(
        r#"
        model = "gpt-4o"
        {extra}
        [budget]
        min_iterations = 2
        [policies]
        pipeline = ["summarize", "drop_iterations"]
        [[summarizers]]
        kind = "openai"
        model = "cfg-model"
        base_url = "{url}/v1"
        timeout_secs = 5
        "#
    ))
    .unwrap()
}

fn compact(cfg: Config) -> abridge::Report {
    let conv = conversation();
    let mut cfg = cfg;
    let total = Compactor::new(cfg.clone()).unwrap().count(&conv).get();
    cfg.budget.target_tokens = Some(total / 4);
    let summarizers = cascade(&cfg.summarizers, None);
    let mut c = Compactor::new(cfg).unwrap();
    c.set_summarizers(summarizers);
    let out = c.compact(&conv).unwrap();
    assert!(validate(&out.conversation).is_empty());
    assert!(out.report.tokens_after.get() <= total / 4);
    out.report
}

#[test]
fn configured_summarizer_is_used() {
    let mock = Mock::start(vec![openai_ok(BRIEFING)]);
    let report = compact(config(&mock.url, ""));
    assert_eq!(report.summarizer.as_deref(), Some("openai:cfg-model"));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body["model"], "cfg-model");
}

#[test]
fn configured_summarizer_that_fails_falls_back_to_offline() {
    let mock = Mock::start(vec![Reply::Http(503, "down".into(), Vec::new())]);
    let report = compact(config(&mock.url, ""));
    assert_eq!(report.summarizer.as_deref(), Some("offline"));
    assert_eq!(report.attempts.len(), 2);
    assert!(
        report.attempts[0]
            .error()
            .unwrap()
            .to_string()
            .contains("503")
    );
    assert_eq!(mock.requests().len(), 1, "the configured server was asked");
}

#[test]
fn a_named_key_variable_that_is_unset_skips_to_the_next_summarizer() {
    let mut cfg = config("http://127.0.0.1:9", "");
    cfg.summarizers[0].api_key_env = Some("ABRIDGE_TEST_SURELY_UNSET_KEY".into());
    let report = compact(cfg);
    assert_eq!(report.summarizer.as_deref(), Some("offline"));
    let e = report.attempts[0].error().unwrap().to_string();
    assert!(
        e.contains("ABRIDGE_TEST_SURELY_UNSET_KEY is not set"),
        "{e}"
    );
}

#[test]
fn configured_error_prefixes_reach_the_llm() {
    // "oops" is a failure only because the config says so.
    let mock = Mock::start(vec![openai_ok(BRIEFING)]);
    let cfg = config(&mock.url, "");
    let mut cfg = cfg;
    cfg.policies.error_prefixes = vec!["oops".into()];
    let conv = {
        let mut c = conversation();
        for m in &mut c.messages {
            for p in &mut m.parts {
                if let abridge::model::Part::ToolResult(r) = p {
                    r.parts = vec![abridge::model::Part::text(format!(
                        "oops: selector not found\n{}",
                        "line\n".repeat(40)
                    ))];
                }
            }
        }
        c
    };
    let total = Compactor::new(cfg.clone()).unwrap().count(&conv).get();
    cfg.budget.target_tokens = Some(total / 4);
    let mut c = Compactor::new(cfg.clone()).unwrap();
    c.set_summarizers(cascade(&cfg.summarizers, None));
    c.compact(&conv).unwrap();
    let user = mock.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("✗ oops: selector not found"), "{user}");
}

#[test]
fn blocking_facade_works_inside_a_runtime() {
    let mock = Mock::start(vec![openai_ok(BRIEFING)]);
    let cfg = config(&mock.url, "");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A compaction called straight from async code must not panic.
    let report = rt.block_on(async { compact(cfg) });
    assert_eq!(report.summarizer.as_deref(), Some("openai:cfg-model"));
}

#[test]
fn a_configured_prompt_replaces_the_built_in_one() {
    let mock = Mock::start(vec![openai_ok(BRIEFING)]);
    let mut cfg = config(&mock.url, "");
    cfg.summarizers[0].prompt = Some("You condense agent logs for ops.".into());
    cfg.summarizers[0].instructions = Some("Keep ticket ids.".into());
    let report = compact(cfg);
    assert_eq!(report.summarizer.as_deref(), Some("openai:cfg-model"));
    let body = &mock.requests()[0].body;
    assert_eq!(
        body["messages"][0]["content"],
        "You condense agent logs for ops."
    );
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.ends_with("Additional instructions:\nKeep ticket ids."),
        "{user}"
    );
}

/// The prompt asks for the offline sheet's own sections, under its own
/// headings: a chained compaction reads an LLM briefing's sections back as
/// it reads a sheet's, and the two are held to the same facts.
#[test]
fn the_prompt_asks_for_the_sheets_sections() {
    let prompt = abridge_llm::DEFAULT_PROMPT;
    let asked: Vec<&str> = prompt
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .collect();
    assert!(asked.len() >= 8, "{asked:?}");
    let titles: Vec<&str> = abridge_summarize::SectionKind::ALL
        .iter()
        .map(|k| k.title())
        .collect();
    for heading in &asked {
        assert!(
            titles.contains(heading),
            "{heading:?} is not a section of the sheet"
        );
    }
    // In the sheet's order.
    let order: Vec<usize> = asked
        .iter()
        .map(|h| titles.iter().position(|t| t == h).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{asked:?}");
}

#[test]
fn the_agents_own_model_is_asked_last_when_every_summarizer_failed() {
    let down = Mock::start(vec![Reply::Http(503, "down".into(), Vec::new())]);
    let agent = Mock::start(vec![openai_ok(BRIEFING)]);
    let mut cfg = config(&down.url, "");
    // Off unless asked for (stagewise's preset asks).
    assert_eq!(cfg.summarizer_specs(Family::OpenAi, None).len(), 1);
    cfg.summary.agent_model_last = true;
    let specs = cfg.summarizer_specs(Family::OpenAi, Some(&format!("{}/v1", agent.url)));
    assert_eq!(specs.len(), 2);
    let conv = conversation();
    let total = Compactor::new(cfg.clone()).unwrap().count(&conv).get();
    cfg.budget.target_tokens = Some(total / 4);
    let mut c = Compactor::new(cfg.clone()).unwrap();
    c.set_summarizers(cascade(&specs, None));
    let report = c.compact(&conv).unwrap().report;
    assert_eq!(report.summarizer.as_deref(), Some("openai:gpt-4o"));
    assert!(
        report.attempts[0]
            .error()
            .unwrap()
            .to_string()
            .contains("503")
    );
    assert_eq!(agent.requests()[0].body["model"], "gpt-4o");
    // Only when the cascade does not hold it already.
    cfg.summarizers[0].model = "gpt-4o".into();
    assert_eq!(cfg.summarizer_specs(Family::OpenAi, None).len(), 1);
    assert!(
        Config::from_toml("preset = \"stagewise\"")
            .unwrap()
            .summary
            .agent_model_last
    );
}
