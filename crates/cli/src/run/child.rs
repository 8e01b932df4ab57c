//! The agent as a child process: the terminal, standard streams and
//! environment it would have had, its exit code passed on. A signal the
//! terminal sends (Ctrl-C, a hang-up) reaches the agent from the terminal
//! itself, as it would without abridge; one another process sends to
//! `abridge run` (`kill -INT`, a supervisor's SIGTERM) is passed on to the
//! agent. Either way `abridge run` outlives the agent, to stop the proxy
//! after it and say what it did.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitStatus};

use anyhow::{Context, Result};

/// Runs `program` with `args` and `env` added to this process's
/// environment, until it exits.
pub(crate) fn run(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<ExitStatus> {
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env);
    let forwarding = forward::Forwarding::start()?;
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    forwarding.to(child.id());
    let status = child.wait();
    forwarding.stop();
    status.with_context(|| format!("waiting for {}", program.display()))
}

/// The exit code to end with: the agent's, or 128 + the signal that ended it.
pub(crate) fn code(status: ExitStatus) -> u8 {
    if let Some(c) = status.code() {
        return u8::try_from(c & 0xff).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return u8::try_from(128 + sig).unwrap_or(255);
        }
    }
    1
}

#[cfg(unix)]
mod forward {
    use std::sync::{Arc, Mutex, PoisonError};

    use anyhow::{Context, Result};
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    use signal_hook::iterator::SignalsInfo;
    use signal_hook::iterator::exfiltrator::WithOrigin;
    use signal_hook::low_level::siginfo::Cause;

    /// A thread that passes on the signals other processes send.
    pub(super) struct Forwarding {
        child: Arc<Mutex<Target>>,
        handle: signal_hook::iterator::Handle,
        thread: std::thread::JoinHandle<()>,
    }

    /// Where signals go: the agent once it has started; until then, the
    /// signals that came are held (the agent can be up, and a signal sent
    /// to abridge, before `spawn` has returned its pid).
    #[derive(Default)]
    struct Target {
        pid: Option<u32>,
        held: Vec<i32>,
    }

    impl Target {
        fn send(&mut self, signal: i32) {
            let Some(pid) = self.pid else {
                self.held.push(signal);
                return;
            };
            let target = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw);
            let sig = rustix::process::Signal::from_named_raw(signal);
            if let (Some(target), Some(sig)) = (target, sig) {
                let _ = rustix::process::kill_process(target, sig);
            }
        }
    }

    impl Forwarding {
        /// Takes SIGINT, SIGTERM, SIGHUP and SIGQUIT from now on (before
        /// the child starts: none is lost in between).
        pub(super) fn start() -> Result<Forwarding> {
            let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
                .context("cannot take the signals to pass on")?;
            let handle = signals.handle();
            let child = Arc::new(Mutex::new(Target::default()));
            let target = child.clone();
            let thread = std::thread::spawn(move || {
                for origin in signals.forever() {
                    // The terminal (the kernel) sent it to the agent too.
                    if matches!(origin.cause, Cause::Kernel) {
                        continue;
                    }
                    target
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .send(origin.signal);
                }
            });
            Ok(Forwarding {
                child,
                handle,
                thread,
            })
        }

        /// Signals go to `pid` from now on.
        pub(super) fn to(&self, pid: u32) {
            let mut target = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            target.pid = Some(pid);
            for signal in std::mem::take(&mut target.held) {
                target.send(signal);
            }
        }

        /// Stops taking signals.
        pub(super) fn stop(self) {
            self.handle.close();
            let _ = self.thread.join();
        }
    }
}

#[cfg(not(unix))]
mod forward {
    use anyhow::Result;

    /// Elsewhere the console sends Ctrl-C to every process attached to it.
    pub(super) struct Forwarding;

    impl Forwarding {
        pub(super) fn start() -> Result<Forwarding> {
            Ok(Forwarding)
        }
        pub(super) fn to(&self, _pid: u32) {}
        pub(super) fn stop(self) {}
    }
}
