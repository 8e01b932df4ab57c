//! Every API abridge speaks, walked from its one table (`Wire::ALL`,
//! `Format::ALL`, `Provider::ALL`), through every command-line front end
//! that names one: a new API that is in the table and missing here fails.

use abridge_model::{Format, Provider, Wire};

use crate::support::{run, text};

fn parses(args: &[&str]) {
    let owned = args.iter().map(|a| (*a).to_owned());
    if let Err(e) = abridge_cli::parses(owned) {
        panic!("abridge {}: {e}", args.join(" "));
    }
}

#[test]
fn the_command_line_takes_every_format_and_provider_by_name() {
    for f in Format::ALL {
        for command in ["compact", "stats", "convert"] {
            let mut args = vec![command, "--format", f.as_str(), "x.json"];
            if command == "convert" {
                args.extend(["--to", "openai"]);
            }
            parses(&args);
        }
    }
    for w in Wire::ALL {
        parses(&["convert", "--to", w.as_str(), "x.json"]);
    }
    for p in Provider::ALL {
        parses(&["run", "--api", p.as_str(), "--", "true"]);
        let flag = format!("--{}", p.facts().upstream_key.replace('_', "-"));
        parses(&["serve", &flag, "http://127.0.0.1:9"]);
    }
}

#[test]
fn every_wire_converts_and_compacts_back_through_the_cli() {
    for w in Wire::ALL {
        let converted = run(
            &[
                "convert",
                "--to",
                w.as_str(),
                "examples/coding-agent.openai.json",
            ],
            None,
        );
        assert!(
            converted.status.success(),
            "{w}: {}",
            text(&converted.stderr)
        );
        let compacted = run(
            &[
                "compact",
                "--format",
                w.as_str(),
                "--target-tokens",
                "700",
                "--no-store",
                "-",
            ],
            Some(&converted.stdout),
        );
        assert!(
            compacted.status.success(),
            "{w}: {}",
            text(&compacted.stderr)
        );
        let report = text(&compacted.stderr);
        assert!(report.contains("→"), "{w}: no report: {report}");
        // Written back in the shape it came in.
        let out: serde_json::Value = serde_json::from_slice(&compacted.stdout).unwrap();
        let back = abridge_model::decode_value(out, w.format());
        assert!(back.is_ok(), "{w}: {:?}", back.err());
    }
}
