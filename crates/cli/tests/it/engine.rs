//! `compact` and `simulate` as a user runs them.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::support::{compact_example, run, text};

fn abridge(args: &[&str]) -> Output {
    run(args, None)
}

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

#[test]
fn compact_reaches_the_target_keeps_the_envelope_and_reports() {
    let dir = std::env::temp_dir().join(format!("abridge-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("out.json");
    let report_path = dir.join("report.json");
    let o = abridge(&[
        "compact",
        "examples/web-agent.anthropic.json",
        "--target-tokens",
        "2500",
        "--keep-last",
        "1",
        "-o",
        out_path.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
        "--events",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["tools"].as_array().unwrap().len(), 3);
    assert!(body["system"].is_array());
    let report: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert!(report["report"]["tokens_after"].as_u64().unwrap() <= 2500);
    assert_eq!(report["report"]["compacted"], true);
    // Events on stderr, one JSON object per line.
    let events: Vec<Value> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    // The room clipping left goes back to the newest page clipped.
    assert_eq!(
        names,
        ["history_size", "room_given_back", "history_compacted"]
    );
    // The output validates and compacting it again changes nothing.
    let v = abridge(&["validate", out_path.to_str().unwrap()]);
    assert!(v.status.success());
    let again = abridge(&[
        "compact",
        out_path.to_str().unwrap(),
        "--target-tokens",
        "2500",
        "--keep-last",
        "1",
        "--compact-json",
        "-o",
        "-",
    ]);
    // `-o -` is stdout, as `-` is stdin: no file of that name.
    assert_eq!(
        serde_json::from_slice::<Value>(&again.stdout).unwrap(),
        body
    );
    assert!(!crate::support::root().join("-").exists());
    assert!(stderr(&again).contains("unchanged"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compact_converts_and_says_when_it_cannot_shrink() {
    let o = abridge(&[
        "compact",
        "examples/coding-agent.openai.json",
        "--target-tokens",
        "900",
        "--keep-last",
        "1",
        "--to",
        "anthropic",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(body["system"].is_string());
    let o = abridge(&[
        "compact",
        "examples/coding-agent.openai.json",
        "--target-tokens",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("cannot shrink below"), "{}", stderr(&o));
    // The smallest valid history it reached is written all the same, as a
    // proxy sends it: smaller than the input, over the target.
    assert!(
        stderr(&o).contains("writing the smallest history it reached")
            && stderr(&o).contains("1560 → "),
        "{}",
        stderr(&o)
    );
    let smallest: Value = serde_json::from_slice(&o.stdout).unwrap();
    let input: Value = serde_json::from_slice(
        &std::fs::read(crate::support::root().join("examples/coding-agent.openai.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(smallest["model"], input["model"]);
    assert!(smallest.to_string().len() < input.to_string().len());
    let o = abridge(&[
        "compact",
        "examples/coding-agent.openai.json",
        "--config",
        "no/such.toml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no/such.toml: cannot read"));
}

#[test]
fn simulate_a_synthetic_run_plateaus() {
    let o = abridge(&[
        "simulate",
        "--synthetic",
        "100",
        "--trigger-tokens",
        "30000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    assert_eq!(s["turns"], 100);
    assert!(s["compactions"].as_u64().unwrap() >= 2);
    assert_eq!(s["consecutive_compactions"], 0);
    assert!(s["peak"].as_u64().unwrap() < 36_000);
    assert!(s["peak_baseline"].as_u64().unwrap() > 100_000);
    assert!(s["billed"].as_u64().unwrap() * 2 < s["billed_baseline"].as_u64().unwrap());
    assert_eq!(v["turns"].as_array().unwrap().len(), 100);
    // The recall tool priced both ways: declared from the first request,
    // every prompt carries it; from the first compaction, fewer do, and
    // that turn reads nothing from the cache.
    let r = &s["recall_tool"];
    let tool = r["tool_tokens"].as_u64().unwrap();
    assert!(tool > 50, "{r}");
    let (late, early) = (&r["from_first_compaction"], &r["from_first_request"]);
    let billed = s["billed"].as_u64().unwrap();
    assert_eq!(early["billed"].as_u64().unwrap(), billed + 100 * tool);
    assert!(late["billed"].as_u64().unwrap() < early["billed"].as_u64().unwrap());
    assert!(late["billed"].as_u64().unwrap() > billed);
    assert!(late["cost"].as_f64().unwrap() > 0.0);
    let table = abridge(&["simulate", "--synthetic", "20", "--family", "anthropic"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("input tokens billed"));
    assert!(table.contains("recall tool"), "{table}");
}

#[test]
fn simulate_the_longest_corpus_run() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/claude-code_marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    if !file.exists() {
        eprintln!("skipping: corpus not found at {}", file.display());
        return;
    }
    let o = abridge(&[
        "simulate",
        file.to_str().unwrap(),
        "--trigger-tokens",
        "60000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    assert!(s["compactions"].as_u64().unwrap() >= 2);
    assert_eq!(s["consecutive_compactions"], 0);
    assert!(s["peak"].as_u64().unwrap() <= 60_000 + 15_000, "{s}");
    assert!(s["final_tokens"].as_u64().unwrap() < s["final_baseline"].as_u64().unwrap() / 2);
    // Billed under Anthropic's caching prices: reads of the unchanged prefix
    // are cheap, a compaction pays a cache write from the first change on.
    let cost = &s["cost"];
    let (base, ours) = (
        cost["baseline"].as_f64().unwrap(),
        cost["abridge"].as_f64().unwrap(),
    );
    assert!(ours > 0.0 && ours < base, "{cost}");
    let hit = s["cache_hit"].as_f64().unwrap();
    assert!(
        hit > 0.5 && hit < s["cache_hit_baseline"].as_f64().unwrap(),
        "{s}"
    );
    let turns = v["turns"].as_array().unwrap();
    let t = turns.iter().find(|t| t["compacted"] == true).unwrap();
    assert!(t["cached"].as_u64().unwrap() < t["tokens"].as_u64().unwrap());
    let t = turns
        .iter()
        .rev()
        .find(|t| t["compacted"] == false)
        .unwrap();
    assert!(t["cached"].as_u64().unwrap() > 0);
}

/// Compacting on every iteration rewrites the cached prefix each turn: with
/// Anthropic's cache prices that costs more than not compacting, and
/// `simulate` says so.
#[test]
fn simulate_says_when_compaction_costs_more_than_none() {
    let dir = std::env::temp_dir().join(format!("abridge-often-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("often.toml");
    std::fs::write(
        &cfg,
        "[trigger]\nevery_iterations = 1\n[budget]\nclear_at_least = 0\n",
    )
    .unwrap();
    let args = [
        "simulate",
        "--synthetic",
        "60",
        "--model",
        "claude-sonnet-4-5",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let o = abridge(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("costs MORE than no compaction"), "{text}");
    let mut json = args.to_vec();
    json.push("--json");
    let v: Value = serde_json::from_slice(&abridge(&json).stdout).unwrap();
    let cost = &v["summary"]["cost"];
    assert!(
        cost["abridge"].as_f64().unwrap() > cost["baseline"].as_f64().unwrap(),
        "{cost}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compact_summarizes_when_clipping_is_not_enough() {
    let o = compact_example(&["--compact-json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    let briefing = body["messages"][2]["content"].as_str().unwrap();
    assert!(
        briefing.starts_with("<compacted-history>\n## "),
        "{briefing}"
    );
    // The task stays verbatim right above; the briefing does not repeat it.
    let task = body["messages"][1]["content"].as_str().unwrap();
    assert!(task.contains("APP-1432") && !briefing.contains("APP-1432"));
    assert!(stderr(&o).contains("summarize"), "{}", stderr(&o));
    // Without a summarizer the same budget drops iterations instead.
    let o = compact_example(&["--summarizer", "none", "--compact-json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        body["messages"][2]["content"]
            .as_str()
            .unwrap()
            .contains("earlier iterations omitted")
    );
}

#[test]
fn compact_with_an_unreachable_llm_falls_back_to_offline() {
    let o = compact_example(&[
        "--summarizer",
        "openai:gpt-4o-mini",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--timeout",
        "5",
        "--compact-json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("summarizer openai:gpt-4o-mini failed: transport error"),
        "{err}"
    );
    assert!(err.contains("with offline"), "{err}");
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        body["messages"][2]["content"]
            .as_str()
            .unwrap()
            .starts_with("<compacted-history>")
    );
    let bad = abridge(&[
        "compact",
        "examples/coding-agent.openai.json",
        "--summarizer",
        "gemini",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown summarizer"));
}

/// `[[summarizers]]` in the config file, no `--summarizer` flag: the
/// configured LLM is asked (its request reaches the server), and when it
/// fails the offline fact sheet takes over.
#[test]
fn compact_uses_the_summarizers_declared_in_the_config() {
    use abridge_testkit::{Mock, Reply, openai_ok};
    let dir = std::env::temp_dir().join(format!("abridge-cli-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let briefing = "## Task\nFix the CSV export for APP-1432.\n\n## Progress\nExport rewritten; tests pending.";
    for (reply, want) in [
        (openai_ok(briefing), "openai:cfg-model"),
        (
            Reply::Http(500, "{\"error\": \"down\"}".into(), Vec::new()),
            "offline",
        ),
    ] {
        let mock = Mock::start(vec![reply]);
        let cfg = dir.join("abridge.toml");
        std::fs::write(
            &cfg,
            format!(
                "[[summarizers]]\nkind = \"openai\"\nmodel = \"cfg-model\"\nbase_url = \"{}/v1\"\ntimeout_secs = 5\n",
                mock.url
            ),
        )
        .unwrap();
        let report = dir.join("report.json");
        let o = crate::support::compact_example(&[
            "--config",
            cfg.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--no-store",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["report"]["summarizer"], want, "{}", stderr(&o));
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1, "the configured summarizer was asked");
        assert_eq!(reqs[0].path, "/v1/chat/completions");
        assert_eq!(reqs[0].body["model"], "cfg-model");
        let body: Value = serde_json::from_slice(&o.stdout).unwrap();
        let text = body["messages"].to_string();
        assert!(text.contains("<compacted-history>"), "{text}");
        if want == "offline" {
            assert!(stderr(&o).contains("summarizer openai:cfg-model failed: HTTP 500"));
        } else {
            assert!(text.contains("Export rewritten; tests pending."));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `abridge eval` on the two Claude Code sessions at their real cut: the
/// table, the JSON and the HTML report agree, the report needs no network,
/// and abridge's briefing keeps more of what the agent used later than the
/// agent's own summary.
#[test]
fn eval_reports_agree_and_the_briefing_beats_the_recorded_summary() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/claude-code_marot-spotter");
    let files: Vec<String> = [
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
    ]
    .iter()
    .map(|f| dir.join(f).display().to_string())
    .collect();
    // Without the corpus, the shipped examples (cut at 50% and 75%; too
    // small for 10%, so at half).
    let (inputs, budget): (Vec<String>, &str) = if dir.is_dir() {
        (files, "0.1")
    } else {
        eprintln!("corpus absent: evaluating the examples only");
        let examples = [
            "examples/coding-agent.openai.json",
            "examples/web-agent.anthropic.json",
        ];
        (examples.map(String::from).to_vec(), "0.5")
    };
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-eval-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let html_path = out.join("report.html");
    let mut args: Vec<&str> = vec![
        "eval",
        "--json",
        "--budget",
        budget,
        "--html",
        html_path.to_str().unwrap(),
    ];
    args.extend(inputs.iter().map(String::as_str));
    let o = abridge(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = std::fs::read_to_string(&html_path).unwrap();
    // The embedded data is the JSON printed.
    let start = html.find("id=\"eval-data\">").unwrap() + "id=\"eval-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let embedded: Value = serde_json::from_str(&html[start..end].replace("<\\/", "</")).unwrap();
    assert_eq!(embedded, json);
    // Every recall cell and every chart bar shows the JSON's figure.
    let cuts = json.as_array().unwrap();
    for cut in cuts {
        for r in cut["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["error"].is_null())
        {
            let cell = format!("data-recall=\"{:.4}\"", r["recall"].as_f64().unwrap());
            assert!(html.contains(&cell), "{cell}");
            let code = r["recall_with_code"].as_f64().unwrap();
            let cell = format!("data-recall-code=\"{code:.4}\"");
            assert!(html.contains(&cell), "{cell}");
        }
    }
    let mean_of = |strategy: &str, metric: &str| {
        let v: Vec<f64> = cuts
            .iter()
            .flat_map(|c| c["results"].as_array().unwrap())
            .filter(|r| r["strategy"] == strategy && r["error"].is_null())
            .filter_map(|r| r[metric].as_f64())
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let bar = format!(
        "data-strategy=\"offline\" data-metric=\"recall\" data-value=\"{:.4}\"",
        mean_of("offline", "recall")
    );
    assert!(html.contains(&bar), "{bar}");
    // Self-contained: nothing is fetched.
    for needle in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "{needle}");
    }
    if dir.is_dir() {
        let (mut recall, mut precision) = (0.0, 0.0);
        for cut in cuts {
            assert_eq!(cut["cut"]["kind"], "recorded");
            let of = |s: &str| {
                cut["results"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["strategy"] == s)
                    .unwrap()
                    .clone()
            };
            let (ours, theirs) = (of("offline"), of("recorded"));
            assert!(ours["valid"] == true && ours["kept"].as_f64().unwrap() <= 0.1 + 1e-9);
            let r = ours["recall"].as_f64().unwrap();
            assert!(
                r > theirs["recall"].as_f64().unwrap() + 0.1,
                "{ours} vs {theirs}"
            );
            // No cut further below the earlier 0.9 than issue 33 allows.
            assert!(r >= 0.88, "{ours}");
            recall += r / cuts.len() as f64;
            precision += ours["precision"].as_f64().unwrap() / cuts.len() as f64;
        }
        // Issue 33's bars on this source (measured 0.915 recall and, counting
        // only what the kept history does not hold, 0.383 precision, against
        // the agent's own 0.709 recall): the output is deterministic, so these
        // fail only on a change to the briefing or the metric.
        assert!(recall >= 0.9, "mean recall {recall}");
        assert!(precision >= 0.35, "mean precision {precision}");
    }
    // Per source: one folder, its figures the means of the cuts above.
    let mut args = vec!["eval", "--by-source", "--json", "--budget", budget];
    args.extend(inputs.iter().map(String::as_str));
    let o = abridge(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let sources: Value = serde_json::from_slice(&o.stdout).unwrap();
    let sources = sources.as_array().unwrap();
    assert!(!sources.is_empty());
    let offline = sources
        .iter()
        .flat_map(|s| s["strategies"].as_array().unwrap())
        .find(|s| s["strategy"] == "offline")
        .unwrap();
    if dir.is_dir() {
        assert_eq!(sources.len(), 1, "{sources:?}");
        assert_eq!(sources[0]["source"], "claude-code_marot-spotter");
        let mean = offline["recall"]["mean"].as_f64().unwrap();
        assert!(
            (mean - mean_of("offline", "recall")).abs() < 1e-9,
            "{offline}"
        );
    }
    std::fs::remove_dir_all(&out).ok();
}

/// The fixed sample CI evaluates: a transcript of each source in the corpus
/// (the smallest with a real compaction where the source has them), figures
/// per source, each beside the others; the agent's own summary beside
/// abridge's where the agent compacted.
#[test]
fn eval_reports_every_source_of_a_fixed_sample() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let sample = [
        "claude-code_entireio-cli/53ea1606-cf60-417b-928a-068324ecc7b3.jsonl",
        "openhands-v1_swebench/8c2a43746feb4be38f21685d256b364a",
        "mini-swe-agent_pr816_deepseek/deepseek_chat_test_1-100__astropy__astropy-14365.traj.json",
        "openhands_swebench-verified/django__django-10973.json",
    ];
    let paths: Vec<String> = sample
        .iter()
        .map(|s| corpus.join(s))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() < sample.len() {
        eprintln!("skipping: the corpus sample is not at {}", corpus.display());
        return;
    }
    let mut args = vec!["eval", "--by-source", "--json"];
    args.extend(paths.iter().map(String::as_str));
    let o = abridge(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let sources: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = sources.as_array().unwrap();
    let named = |source: &str, cuts: &str| {
        rows.iter()
            .find(|r| r["source"] == source && r["cuts"] == cuts)
            .unwrap_or_else(|| panic!("no {source} {cuts} in {sources}"))
    };
    for (source, cuts) in [
        ("claude-code_entireio-cli", "recorded"),
        ("openhands-v1_swebench", "recorded"),
        ("mini-swe-agent_pr816_deepseek", "fraction"),
        ("openhands_swebench-verified", "fraction"),
    ] {
        let row = named(source, cuts);
        let strategies = row["strategies"].as_array().unwrap();
        let of = |s: &str| strategies.iter().find(|x| x["strategy"] == s);
        let offline = of("offline").unwrap_or_else(|| panic!("{row}"));
        for metric in ["recall", "kept"] {
            let v = offline[metric]["mean"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{source} {metric} {v}");
        }
        // Each figure beside the same figure over the other sources.
        assert!(offline["others_recall"].as_f64().is_some(), "{row}");
        // Where the agent compacted, its own summary is scored beside.
        assert_eq!(of("recorded").is_some(), cuts == "recorded", "{source}");
        // The briefing's sections add up to what it names, each used at most
        // as often as named.
        // A briefing whose names were ever used again has a section that
        // named them.
        let sections = offline["sections"].as_array().unwrap();
        let precise = offline["precision"]["mean"].as_f64().unwrap_or(0.0) > 0.0;
        assert_eq!(
            precise,
            sections.iter().any(|s| s["used"].as_u64() > Some(0)),
            "{source}: {row}"
        );
        for s in sections {
            let (named, used) = (s["named"].as_u64().unwrap(), s["used"].as_u64().unwrap());
            assert!(named > 0 && used <= named, "{s}");
        }
    }
}

/// With a model (`--probes`), every strategy answers probe questions from
/// its compacted history and a judge grades them: the full history answers
/// everything, and a history that lost the fact does not. The model is a
/// server on 127.0.0.1 that plays writer, answerer, judge and summarizer.
#[test]
fn eval_probes_are_answered_and_graded_per_strategy() {
    use abridge_testkit::{Mock, openai_ok};
    let mock = Mock::serve(|req| {
        let system = req.body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let user = req.body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let reply = if system.contains("probe questions") {
            r#"Here: [{"kind": "fact", "question": "Which error code did the first build report?", "answer": "E0599"},
                      {"kind": "files", "question": "Which file holds the date formatting?", "answer": "src/export.rs"}]"#
                .to_owned()
        } else if system.starts_with("Answer each question") {
            let fact = if user.contains("E0599") {
                "E0599"
            } else {
                "unknown"
            };
            serde_json::json!([fact, "src/export.rs"]).to_string()
        } else if system.starts_with("Grade each answer") {
            let pairs: Value = serde_json::from_str(&user).unwrap();
            let grades: Vec<u8> = pairs
                .as_array()
                .unwrap()
                .iter()
                .map(|p| if p["answer"] == p["reference"] { 5 } else { 0 })
                .collect();
            serde_json::to_string(&grades).unwrap()
        } else {
            "## Task\nFix the CSV date format (APP-1432).\n\n## Progress\nIN-PROGRESS.".to_owned()
        };
        Some(openai_ok(&reply))
    });
    let base = format!("{}/v1", mock.url);
    let o = abridge(&[
        "eval",
        "examples/coding-agent.openai.json",
        "--budget",
        "0.5",
        "--json",
        "--probes",
        "--summarizer",
        "openai:judge",
        "--base-url",
        &base,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cuts: Value = serde_json::from_slice(&o.stdout).unwrap();
    let cuts = cuts.as_array().unwrap();
    assert_eq!(cuts.len(), 2);
    for cut in cuts {
        assert_eq!(cut["probes"].as_array().unwrap().len(), 2, "{cut}");
        assert!(cut["probe_error"].is_null());
        let score = |s: &str| {
            cut["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["strategy"] == s)
                .unwrap()["probe_score"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(score("none"), 1.0, "the full history answers everything");
        assert!(score("drop_oldest") <= score("none"));
        // The LLM strategy ran too, with the same model as summarizer: its
        // briefing (the model's, checked and completed) went into a valid
        // history, scored on the offline briefing's figures.
        let results = cut["results"].as_array().unwrap();
        let llm = results
            .iter()
            .find(|r| r["strategy"] == "llm")
            .expect("llm");
        assert!(llm["error"].is_null() && llm["valid"] == true, "{llm}");
        let briefing = llm["briefing"].as_str().unwrap_or_default();
        assert!(
            briefing.contains("Fix the CSV date format (APP-1432)."),
            "{llm}"
        );
        let offline = results.iter().find(|r| r["strategy"] == "offline").unwrap();
        for metric in ["recall", "kept", "precision"] {
            assert!(llm[metric].is_number(), "llm {metric}: {llm}");
            assert!(offline[metric].is_number(), "offline {metric}: {offline}");
        }
    }
    let lost = cuts
        .iter()
        .flat_map(|c| c["results"].as_array().unwrap())
        .filter(|r| r["probe_score"].as_f64() == Some(0.5))
        .count();
    assert!(lost > 0, "some strategy lost the error code");
    assert!(
        mock.requests()
            .iter()
            .all(|r| r.path == "/v1/chat/completions")
    );
    // Without a model, --probes says what it needs.
    let o = abridge(&["eval", "examples/coding-agent.openai.json", "--probes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--probes needs a model"),
        "{}",
        stderr(&o)
    );
}
