//! Running the `abridge` binary as a user would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

/// The repository root (examples live there).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `abridge` from the repository root, with `stdin` if given. Snapshots
/// go to a folder of this test run, never the user's data directory.
pub(crate) fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    // Under target/: `cargo clean` removes it, and nothing piles up in /tmp.
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("abridge-data-{}", std::process::id()));
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

/// A running `abridge serve` or `abridge ui`, at the address it printed.
pub(crate) struct Server {
    child: Child,
    pub(crate) base: String,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_abridge"))
            .args(args)
            .current_dir(root())
            .env_remove("ABRIDGE_UI_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut base = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            // The first address it prints (`listening on http://…`, or the
            // dashboard's), cut to scheme, host and port.
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                let rest = &url["http://".len()..];
                let host = rest.split(['/', ' ', ')', ',']).next().unwrap();
                base = Some(format!("http://{host}"));
                break;
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        Server {
            child,
            base: base.expect("the address it listens on"),
        }
    }

    /// GET `path`: status and body.
    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        self.get_as("localhost", path)
    }

    /// GET `path` with `host` as its `Host`.
    pub(crate) fn get_as(&self, host: &str, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.base.trim_start_matches("http://")).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let status = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
        (
            status,
            raw.split_once("\r\n\r\n")
                .map(|(_, b)| b.to_owned())
                .unwrap_or_default(),
        )
    }
}

impl Server {
    /// Waits until `/readyz` answers 200 (a proxy builds its tokenizer
    /// tables first); panics after 30 s, or on an answer other than 503.
    pub(crate) fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (status, text) = self.get("/readyz");
            match status {
                200 => return,
                503 if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                _ => panic!("not ready: {status} {text}"),
            }
        }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
