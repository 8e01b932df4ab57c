//! Running the `abridge` binary as a user would.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The repository root (examples live there).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `abridge` from the repository root, with `stdin` if given. Snapshots
/// go to a folder of this test run, never the user's data directory.
pub(crate) fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let data = std::env::temp_dir().join(format!("abridge-data-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_abridge"))
        .args(args)
        .current_dir(root())
        .env("XDG_DATA_HOME", &data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// Output bytes as text.
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `abridge compact` of the coding-agent example to 700 tokens, keeping the
/// last 2 iterations (a budget where clipping alone is not enough), plus `extra`.
pub(crate) fn compact_example(extra: &[&str]) -> Output {
    let mut args = vec![
        "compact",
        "examples/coding-agent.openai.json",
        "--target-tokens",
        "700",
        "--keep-last",
        "2",
    ];
    args.extend_from_slice(extra);
    run(&args, None)
}
