//! How each agent takes its endpoint: the one table of `abridge run`'s
//! recipes, and the launch each one makes of a proxy's address. Nothing the
//! user owns is written: variables go to the child only, and an agent that
//! reads its endpoint from configuration gets it on its command line, in a
//! variable it merges last, or from a file in a temporary directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abridge::model::Provider;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// How a recipe points its agent at the proxy.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// Environment variables, each with the API whose base URL it takes.
    Env(&'static [(&'static str, Provider)]),
    /// Codex: `-c openai_base_url=…` on its command line (0.169 ignores
    /// `OPENAI_BASE_URL`; its built-in provider honours the setting).
    CodexFlag,
    /// OpenCode: its providers' `options.baseURL` in
    /// `OPENCODE_CONFIG_CONTENT`, which it merges over every config file.
    OpencodeContent,
    /// pi: an extension, loaded with `-e`, that moves its built-in
    /// providers' base URLs.
    PiExtension,
    /// GitHub Copilot CLI with a model provider of the user's own (BYOK):
    /// `COPILOT_PROVIDER_BASE_URL`, by `COPILOT_PROVIDER_TYPE`.
    CopilotByok,
}

/// One agent `abridge run` knows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recipe {
    /// What `abridge run` calls it.
    pub(crate) name: &'static str,
    /// Its product name.
    pub(crate) title: &'static str,
    /// Its program, looked up on `PATH`.
    pub(crate) program: &'static str,
    /// What it is pointed with, in a few words.
    pub(crate) how: &'static str,
    /// The version the tests run, when they run it.
    pub(crate) tested: Option<&'static str>,
    point: Point,
}

/// The recipes, in the order `--list` shows them.
pub(crate) const RECIPES: &[Recipe] = &[
    Recipe {
        name: "claude",
        title: "Claude Code",
        program: "claude",
        how: "ANTHROPIC_BASE_URL",
        tested: Some("@anthropic-ai/claude-code 2.1.328"),
        point: Point::Env(&[("ANTHROPIC_BASE_URL", Provider::Anthropic)]),
    },
    Recipe {
        name: "codex",
        title: "Codex CLI",
        program: "codex",
        how: "-c openai_base_url=… (its built-in OpenAI provider)",
        tested: Some("@openai/codex 0.169.0"),
        point: Point::CodexFlag,
    },
    Recipe {
        name: "gemini",
        title: "Gemini CLI",
        program: "gemini",
        how: "GOOGLE_GEMINI_BASE_URL (API-key auth)",
        tested: Some("@google/gemini-cli 0.61.0"),
        point: Point::Env(&[("GOOGLE_GEMINI_BASE_URL", Provider::Gemini)]),
    },
    Recipe {
        name: "opencode",
        title: "OpenCode",
        program: "opencode",
        how: "OPENCODE_CONFIG_CONTENT: provider.{anthropic,openai,google}.options.baseURL",
        tested: Some("opencode-ai 1.18.33"),
        point: Point::OpencodeContent,
    },
    Recipe {
        name: "pi",
        title: "pi",
        program: "pi",
        how: "-e <extension> moving the anthropic, openai and google providers' baseUrl (pi needs Node 22.19)",
        tested: None,
        point: Point::PiExtension,
    },
    Recipe {
        name: "copilot",
        title: "GitHub Copilot CLI (BYOK)",
        program: "copilot",
        how: "COPILOT_PROVIDER_BASE_URL (needs your own provider: COPILOT_PROVIDER_BASE_URL set)",
        tested: Some("@github/copilot 1.0.102"),
        point: Point::CopilotByok,
    },
];

/// The recipe called `name`.
pub(crate) fn find(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}

/// What a proxy's address makes of an agent's launch.
#[derive(Debug, Default)]
pub(crate) struct Launch {
    /// Arguments before the user's.
    pub(crate) args: Vec<String>,
    /// Variables set for the child.
    pub(crate) env: BTreeMap<String, String>,
    /// Upstreams the user's own settings named (the proxy forwards there).
    pub(crate) upstreams: BTreeMap<Provider, String>,
    /// Files made for the launch, removed with it.
    pub(crate) temp: Option<TempDir>,
}

/// The base URL an agent speaking `api` is given for a proxy at `root`:
/// the proxy's root and the part of a path its provider's base holds
/// (OpenAI's `/v1`).
pub(crate) fn base(root: &str, api: Provider) -> String {
    format!("{root}{}", api.facts().base_path)
}

/// The environment the launch reads: the parent's, or a test's.
pub(crate) trait Environment {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process's own environment.
pub(crate) struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

/// The generic form's variables: the ones SDKs and frameworks read.
pub(crate) fn generic(api: Provider) -> &'static [(&'static str, Provider)] {
    match api {
        Provider::OpenAi => &[
            ("OPENAI_BASE_URL", Provider::OpenAi),
            ("OPENAI_API_BASE", Provider::OpenAi),
        ],
        Provider::Anthropic => &[("ANTHROPIC_BASE_URL", Provider::Anthropic)],
        Provider::Gemini => &[("GOOGLE_GEMINI_BASE_URL", Provider::Gemini)],
    }
}

/// The launch of the generic form for `api`.
pub(crate) fn launch_generic(api: Provider, root: &str, env: &dyn Environment) -> Launch {
    let mut launch = Launch::default();
    by_env(&mut launch, generic(api), root, env);
    launch
}

fn by_env(
    launch: &mut Launch,
    vars: &[(&'static str, Provider)],
    root: &str,
    env: &dyn Environment,
) {
    for (name, api) in vars {
        // What the user pointed the agent at is where the proxy forwards.
        if let Some(theirs) = env.var(name) {
            launch.upstreams.entry(*api).or_insert(theirs);
        }
        launch.env.insert((*name).to_owned(), base(root, *api));
    }
}

impl Recipe {
    /// The launch that points this agent at a proxy at `root`.
    pub(crate) fn launch(&self, root: &str, env: &dyn Environment) -> Result<Launch> {
        let mut launch = Launch::default();
        match self.point {
            Point::Env(vars) => by_env(&mut launch, vars, root, env),
            Point::CodexFlag => {
                if let Some(theirs) = codex_base_url(env) {
                    launch.upstreams.insert(Provider::OpenAi, theirs);
                }
                launch.args = vec![
                    "-c".into(),
                    format!(
                        "openai_base_url={}",
                        toml_string(&base(root, Provider::OpenAi))
                    ),
                ];
            }
            Point::OpencodeContent => {
                // The global config's base URLs, then the content's (merged
                // after it, as OpenCode does).
                if let Some(file) = opencode_config(env) {
                    launch.upstreams.extend(opencode_base_urls(&file));
                }
                let (content, upstreams) =
                    opencode_content(root, env.var("OPENCODE_CONFIG_CONTENT"))?;
                launch.env.insert("OPENCODE_CONFIG_CONTENT".into(), content);
                launch.upstreams.extend(upstreams);
            }
            Point::PiExtension => {
                let dir = TempDir::new("pi")?;
                let file = dir.path().join("abridge-endpoint.ts");
                std::fs::write(&file, pi_extension(root))
                    .with_context(|| format!("cannot write {}", file.display()))?;
                launch.args = vec!["-e".into(), file.display().to_string()];
                launch.temp = Some(dir);
            }
            Point::CopilotByok => {
                let Some(theirs) = env.var("COPILOT_PROVIDER_BASE_URL") else {
                    bail!(
                        "abridge run copilot needs your own model provider (BYOK): set COPILOT_PROVIDER_BASE_URL \
                         (and COPILOT_PROVIDER_TYPE, COPILOT_PROVIDER_API_KEY, COPILOT_MODEL); GitHub's hosted models cannot be proxied"
                    );
                };
                let api = match env.var("COPILOT_PROVIDER_TYPE").as_deref() {
                    None | Some("openai") => Provider::OpenAi,
                    Some("anthropic") => Provider::Anthropic,
                    Some(other) => bail!(
                        "COPILOT_PROVIDER_TYPE={other}: abridge run copilot proxies the openai and anthropic provider types"
                    ),
                };
                launch.upstreams.insert(api, theirs);
                launch
                    .env
                    .insert("COPILOT_PROVIDER_BASE_URL".into(), base(root, api));
            }
        }
        Ok(launch)
    }
}

/// A TOML basic string of `s`.
fn toml_string(s: &str) -> String {
    // JSON's string escapes are valid TOML basic-string escapes.
    Value::String(s.to_owned()).to_string()
}

/// The `openai_base_url` of the user's Codex config, if it sets one.
fn codex_base_url(env: &dyn Environment) -> Option<String> {
    let home = env
        .var("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|h| Path::new(&h).join(".codex")))?;
    let text = std::fs::read_to_string(home.join("config.toml")).ok()?;
    let table: toml::Table = text.parse().ok()?;
    Some(table.get("openai_base_url")?.as_str()?.to_owned())
}

/// The providers OpenCode is pointed with, and the base URL of each.
const OPENCODE_PROVIDERS: [(&str, Provider, &str); 3] = [
    ("anthropic", Provider::Anthropic, "/v1"),
    ("openai", Provider::OpenAi, "/v1"),
    ("google", Provider::Gemini, "/v1beta"),
];

/// The user's global OpenCode config (`opencode.json`), when it is JSON.
fn opencode_config(env: &dyn Environment) -> Option<Value> {
    let dir = env
        .var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env.var("HOME").map(|h| Path::new(&h).join(".config")))?;
    let text = std::fs::read_to_string(dir.join("opencode").join("opencode.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The base URLs an OpenCode config names for the providers abridge
/// points, as the proxy's upstreams (Anthropic's and Gemini's host roots).
fn opencode_base_urls(config: &Value) -> Vec<(Provider, String)> {
    OPENCODE_PROVIDERS
        .iter()
        .filter_map(|(name, api, suffix)| {
            let url = config
                .pointer(&format!("/provider/{name}/options/baseURL"))?
                .as_str()?;
            let upstream = match api {
                Provider::OpenAi => url.to_owned(),
                _ => url
                    .trim_end_matches('/')
                    .trim_end_matches(suffix)
                    .to_owned(),
            };
            Some((*api, upstream))
        })
        .collect()
}

/// `OPENCODE_CONFIG_CONTENT` with the providers' base URLs at the proxy,
/// over the user's own content when there is one; and the base URLs that
/// content named (the upstreams).
fn opencode_content(
    root: &str,
    theirs: Option<String>,
) -> Result<(String, Vec<(Provider, String)>)> {
    let mut config: Value = match theirs {
        Some(text) => serde_json::from_str(&text)
            .context("OPENCODE_CONFIG_CONTENT is not JSON: abridge run opencode merges into it")?,
        None => json!({}),
    };
    let Some(obj) = config.as_object_mut() else {
        bail!("OPENCODE_CONFIG_CONTENT is not a JSON object");
    };
    let upstreams = opencode_base_urls(&Value::Object(obj.clone()));
    let providers = obj.entry("provider").or_insert_with(|| json!({}));
    for (name, _, suffix) in OPENCODE_PROVIDERS {
        let Some(p) = providers.as_object_mut() else {
            bail!("OPENCODE_CONFIG_CONTENT's provider is not an object");
        };
        let entry = p.entry(name).or_insert_with(|| json!({}));
        let options = entry
            .as_object_mut()
            .context("an OPENCODE_CONFIG_CONTENT provider is not an object")?
            .entry("options")
            .or_insert_with(|| json!({}));
        options["baseURL"] = json!(format!("{root}{suffix}"));
    }
    Ok((config.to_string(), upstreams))
}

/// A pi extension that moves the built-in providers to the proxy.
fn pi_extension(root: &str) -> String {
    let s = |v: String| Value::String(v).to_string();
    format!(
        "// Written by abridge run for this launch only: pi's built-in providers\n\
         // send their requests through abridge at {root}.\n\
         export default function (pi: any) {{\n\
         \x20 pi.registerProvider(\"anthropic\", {{ baseUrl: {} }});\n\
         \x20 pi.registerProvider(\"openai\", {{ baseUrl: {} }});\n\
         \x20 pi.registerProvider(\"google\", {{ baseUrl: {} }});\n\
         }}\n",
        s(base(root, Provider::Anthropic)),
        s(base(root, Provider::OpenAi)),
        s(format!("{root}/v1beta")),
    )
}

/// A directory of this process's own, removed when dropped.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Result<TempDir> {
        let path = std::env::temp_dir().join(format!("abridge-run-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where `program` is on `PATH`, if it is.
pub(crate) fn on_path(program: &str, env: &dyn Environment) -> Option<PathBuf> {
    let path = env.var("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(&'static [(&'static str, &'static str)]);

    impl Environment for Vars {
        fn var(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    const ROOT: &str = "http://127.0.0.1:9";

    #[test]
    fn a_variable_the_user_set_becomes_the_upstream_and_points_at_the_proxy() {
        let env = Vars(&[("ANTHROPIC_BASE_URL", "https://gateway.example/anthropic")]);
        let l = find("claude").unwrap().launch(ROOT, &env).unwrap();
        assert_eq!(l.env["ANTHROPIC_BASE_URL"], ROOT);
        assert_eq!(
            l.upstreams[&Provider::Anthropic],
            "https://gateway.example/anthropic"
        );
        assert!(l.args.is_empty());
    }

    #[test]
    fn codex_gets_its_base_url_on_its_command_line() {
        let l = find("codex").unwrap().launch(ROOT, &Vars(&[])).unwrap();
        assert_eq!(l.args, ["-c", "openai_base_url=\"http://127.0.0.1:9/v1\""]);
        assert!(l.env.is_empty());
    }

    #[test]
    fn opencode_content_is_merged_and_its_base_urls_become_upstreams() {
        let env = Vars(&[(
            "OPENCODE_CONFIG_CONTENT",
            r#"{"model":"anthropic/claude-sonnet-5","provider":{"anthropic":{"options":{"baseURL":"https://gw.example/v1","timeout":5}}}}"#,
        )]);
        let l = find("opencode").unwrap().launch(ROOT, &env).unwrap();
        let c: Value = serde_json::from_str(&l.env["OPENCODE_CONFIG_CONTENT"]).unwrap();
        assert_eq!(c["model"], "anthropic/claude-sonnet-5");
        assert_eq!(c["provider"]["anthropic"]["options"]["timeout"], 5);
        assert_eq!(
            c["provider"]["anthropic"]["options"]["baseURL"],
            format!("{ROOT}/v1")
        );
        assert_eq!(
            c["provider"]["google"]["options"]["baseURL"],
            format!("{ROOT}/v1beta")
        );
        assert_eq!(l.upstreams[&Provider::Anthropic], "https://gw.example");
    }

    #[test]
    fn pi_loads_an_extension_from_a_directory_gone_with_the_launch() {
        let l = find("pi").unwrap().launch(ROOT, &Vars(&[])).unwrap();
        assert_eq!(l.args[0], "-e");
        let file = PathBuf::from(&l.args[1]);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains(r#"pi.registerProvider("openai", { baseUrl: "http://127.0.0.1:9/v1" })"#),
            "{text}"
        );
        drop(l);
        assert!(!file.exists());
    }

    #[test]
    fn copilot_without_a_provider_of_ones_own_is_refused_and_with_one_is_proxied() {
        let e = find("copilot")
            .unwrap()
            .launch(ROOT, &Vars(&[]))
            .unwrap_err();
        assert!(e.to_string().contains("COPILOT_PROVIDER_BASE_URL"), "{e}");
        let env = Vars(&[
            ("COPILOT_PROVIDER_BASE_URL", "https://api.anthropic.com"),
            ("COPILOT_PROVIDER_TYPE", "anthropic"),
        ]);
        let l = find("copilot").unwrap().launch(ROOT, &env).unwrap();
        assert_eq!(l.env["COPILOT_PROVIDER_BASE_URL"], ROOT);
        assert_eq!(
            l.upstreams[&Provider::Anthropic],
            "https://api.anthropic.com"
        );
    }

    #[test]
    fn the_generic_form_sets_the_variables_sdks_read() {
        let l = launch_generic(Provider::OpenAi, ROOT, &Vars(&[]));
        assert_eq!(l.env["OPENAI_BASE_URL"], format!("{ROOT}/v1"));
        assert_eq!(l.env["OPENAI_API_BASE"], format!("{ROOT}/v1"));
    }
}
