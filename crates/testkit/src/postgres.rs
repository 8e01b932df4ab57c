//! A real PostgreSQL server for tests: Debian's binaries, a fresh cluster in
//! a temporary directory, a free port on 127.0.0.1, stopped on drop. As
//! root, the server runs as the `postgres` user (PostgreSQL refuses root).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server.
#[derive(Debug)]
pub struct Postgres {
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
}

impl Postgres {
    /// Starts a server, or says why it cannot (no PostgreSQL installed).
    pub fn start() -> Result<Postgres, String> {
        let bin = find_bin().ok_or(
            "PostgreSQL is not installed (no initdb on PATH or under /usr/lib/postgresql)",
        )?;
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!(
            "abridge-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let pg = Postgres {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
            as_postgres,
        };
        if as_postgres {
            run(Command::new("chown").arg("-R").arg("postgres").arg(&pg.dir))?;
        }
        let data = pg.dir.join("data");
        pg.tool(
            "initdb",
            &[
                "-D",
                path(&data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            pg.dir.display()
        );
        let log = pg.dir.join("server.log");
        pg.tool(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                path(&data),
                "-l",
                path(&log),
                "-o",
                &options,
            ],
        )?;
        Ok(pg)
    }

    fn tool(&self, name: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args).current_dir(&self.dir);
        run(&mut cmd)
    }
}

impl Postgres {
    /// Stops the server — the postmaster and every backend it forked — with
    /// `SIGSTOP`, as a database that hangs: connections stay open, queries wait.
    pub fn pause(&self) -> Result<(), String> {
        self.signal("-STOP")
    }

    /// Lets a paused server go on (`SIGCONT`).
    pub fn resume(&self) -> Result<(), String> {
        self.signal("-CONT")
    }

    /// Runs `sql` in a client of its own (`psql`, autocommit) and returns
    /// what it printed (unaligned, tuples only).
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(self.psql_bin())
            .args([
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                &self.url,
                "-c",
                sql,
            ])
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if !out.status.success() {
            return Err(format!("psql: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn psql_bin(&self) -> PathBuf {
        let beside = self.bin.join("psql");
        match beside.is_file() {
            true => beside,
            false => PathBuf::from("psql"),
        }
    }

    /// Opens a transaction in another client (`psql`), runs `sql` in it and
    /// keeps it open — holding whatever locks `sql` took — until the
    /// returned [`Held`] is released or dropped.
    pub fn hold(&self, sql: &str) -> Result<Held, String> {
        use std::io::{BufRead, Write};
        let mut child = Command::new(self.psql_bin())
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &self.url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("psql: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("psql: no stdin")?;
        let stdout = child.stdout.take().ok_or("psql: no stdout")?;
        writeln!(stdin, "BEGIN;\n{sql};\nSELECT 'abridge-held';").map_err(|e| e.to_string())?;
        // Held once psql answers the marker: `sql` ran and its locks are taken.
        let mut lines = std::io::BufReader::new(stdout).lines();
        lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains("abridge-held"))
            .ok_or_else(|| format!("psql did not run {sql:?}"))?;
        Ok(Held {
            child,
            stdin: Some(stdin),
        })
    }

    fn signal(&self, sig: &str) -> Result<(), String> {
        let pid_file = self.dir.join("data").join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file).map_err(|e| e.to_string())?;
        let postmaster = text.lines().next().unwrap_or_default().trim().to_owned();
        let mut pids = vec![postmaster.clone()];
        pids.extend(children_of(&postmaster));
        run(Command::new("kill").arg(sig).args(&pids))
    }
}

/// A transaction left open in another client by [`Postgres::hold`].
#[derive(Debug)]
pub struct Held {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
}

impl Held {
    /// Ends the transaction (its locks go) and the client.
    pub fn release(mut self) -> Result<(), String> {
        self.end()
    }

    fn end(&mut self) -> Result<(), String> {
        use std::io::Write;
        if let Some(mut stdin) = self.stdin.take() {
            writeln!(stdin, "ROLLBACK;\n\\q").map_err(|e| e.to_string())?;
        }
        self.child.wait().map(|_| ()).map_err(|e| e.to_string())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// The processes whose parent is `pid` (from /proc).
fn children_of(pid: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // pid (comm) state ppid …: the comm may hold spaces, so read after its ')'.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            (ppid == pid).then_some(name)
        })
        .collect()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A test that failed while the server was paused leaves it stopped.
        let _ = self.resume();
        let data = self.dir.join("data");
        let _ = self.tool("pg_ctl", &["stop", "-m", "immediate", "-D", path(&data)]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The directory of `initdb`: on PATH, else the newest Debian install.
fn find_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    });
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").is_file())
            .collect();
        versions.sort();
        versions.pop()
    })
}
