//! Real processes for the tests that drive them (`realtime_crash`, `realtime_faults`): the
//! `sundial-local` binary started on a stack of the emulator, waited for and killed with SIGKILL;
//! and the emulator's own process, found by the loopback port it listens on, paused (SIGSTOP)
//! and resumed (SIGCONT) by a helper that resumes it by itself even if the test dies.

use std::path::{Path, PathBuf};

/// `target/debug/sundial-local`, next to the folder the running test binary sits in (built by
/// `cargo build --workspace --bins`, which `scripts/test` does first).
pub fn runtime_binary() -> PathBuf {
    let binary = profile_dir().join("sundial-local");
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build --workspace --bins` (scripts/test does)",
        binary.display()
    );
    binary
}

/// The cargo profile folder the running test binary belongs to (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/debug/deps/<test binary>
    exe.parent().and_then(Path::parent).expect("the test binary lives in target/<profile>/deps").to_path_buf()
}

/// A free TCP port on 127.0.0.1 (the kernel's pick; free when this returns).
pub fn free_loopback_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free loopback port");
    listener.local_addr().expect("the bound address").port()
}

/// Where one runtime process logs: its JSON log lines and its stderr.
#[derive(Debug, Clone)]
pub struct Logs {
    pub log: PathBuf,
    pub stderr: PathBuf,
}

impl Logs {
    /// `<base>.log` and `<base>.stderr`.
    pub fn at(base: &Path) -> Logs {
        Logs { log: base.with_extension("log"), stderr: base.with_extension("stderr") }
    }

    /// The log lines that mention `needle`, at most `max`.
    pub fn lines_with(&self, needle: &str, max: usize) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|l| l.contains(needle)).take(max).map(str::to_string).collect()
    }
}

/// How to start one `sundial-local serve`.
#[derive(Debug, Clone)]
pub struct RuntimeSpec {
    /// The stack (resource name prefix) it provisions and serves.
    pub stack: String,
    /// `127.0.0.1:<port>` for its API.
    pub listen: String,
    /// `SUNDIAL_API_KEYS`: `key:owner[,…]`.
    pub api_keys: String,
    /// Worker tasks polling the runs queue.
    pub workers: usize,
    /// More variables (`SUNDIAL_*`); the `AWS_*` ones pointing at the emulator are inherited.
    pub env: Vec<(String, String)>,
}

impl RuntimeSpec {
    /// The runtime's API base URL.
    pub fn api(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// Starts the process; it is killed (SIGKILL) when the returned child is dropped.
    pub fn spawn(&self, logs: &Logs) -> tokio::process::Child {
        if let Some(dir) = logs.stderr.parent() {
            std::fs::create_dir_all(dir).expect("creating the log folder");
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&logs.stderr)
            .expect("opening stderr's file");
        tokio::process::Command::new(runtime_binary())
            .arg("serve")
            .env("SUNDIAL_STACK", &self.stack)
            .env("SUNDIAL_LISTEN", &self.listen)
            .env("SUNDIAL_API_KEYS", &self.api_keys)
            .env("SUNDIAL_LOCAL_LOG", &logs.log)
            .env("SUNDIAL_LOCAL_WORKERS", self.workers.to_string())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("starting sundial-local")
    }
}

/// Waits until the runtime's API at `api` answers a request authenticated with `key`, up to
/// `within`; panics (with its stderr) if the process exits first or the time runs out.
pub async fn wait_ready(
    child: &mut tokio::process::Child,
    api: &str,
    key: &str,
    logs: &Logs,
    within: std::time::Duration,
) {
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("polling the runtime process") {
            panic!(
                "sundial-local exited ({status}) before serving; stderr:\n{}",
                std::fs::read_to_string(&logs.stderr).unwrap_or_default()
            );
        }
        let reply = client
            .get(format!("{api}/v1/jobs?limit=1"))
            .bearer_auth(key)
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await;
        if reply.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "sundial-local did not serve {api} within {within:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The pid of the emulator the tests talk to: `SUNDIAL_EMULATOR_PID` when set, or else the
/// process listening on the loopback port of `AWS_ENDPOINT_URL` (read from `/proc`). Either way
/// it must be a ministack (its command line names it), or this returns an error saying why:
/// nothing else is ever signalled.
pub fn emulator_pid() -> Result<u32, String> {
    let pid = match std::env::var("SUNDIAL_EMULATOR_PID").ok().filter(|v| !v.trim().is_empty()) {
        Some(text) => {
            text.trim().parse::<u32>().map_err(|_| format!("SUNDIAL_EMULATOR_PID `{text}` is not a pid"))?
        }
        None => {
            let endpoint =
                std::env::var("AWS_ENDPOINT_URL").map_err(|_| "AWS_ENDPOINT_URL is not set".to_string())?;
            let url =
                url::Url::parse(&endpoint).map_err(|e| format!("AWS_ENDPOINT_URL `{endpoint}`: {e}"))?;
            let port = url.port_or_known_default().ok_or_else(|| format!("no port in `{endpoint}`"))?;
            listener_pid(port)?
        }
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| format!("pid {pid}: {e}"))?;
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    if !cmdline.contains("ministack") {
        return Err(format!("pid {pid} (`{cmdline}`) is not a ministack; left alone"));
    }
    Ok(pid)
}

/// The process that listens on TCP `port` (IPv4 or IPv6), from `/proc/net/tcp*` (the socket's
/// inode) and `/proc/<pid>/fd` (who holds it).
pub fn listener_pid(port: u16) -> Result<u32, String> {
    let wanted = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl, local_address, rem_address, st (0A: LISTEN), …, inode at index 9.
            if fields.len() > 9 && fields[1].ends_with(&wanted) && fields[3] == "0A" {
                inodes.push(format!("socket:[{}]", fields[9]));
            }
        }
    }
    if inodes.is_empty() {
        return Err(format!("nothing listens on port {port}"));
    }
    let procs = std::fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))?;
    for entry in procs.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| target.as_os_str() == i.as_str())
            {
                return Ok(pid);
            }
        }
    }
    Err(format!("no process of ours holds the socket listening on port {port}"))
}

/// Sends `signal` (`STOP`, `CONT`, …) to `pid` with `kill(1)`.
fn signal(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// A pause of the emulator: SIGSTOP now, SIGCONT after `seconds` by a shell of its own (so the
/// emulator is resumed even if the test process dies meanwhile), and SIGCONT again when this is
/// dropped (a test that panics mid-pause resumes it at once).
#[derive(Debug)]
pub struct EmulatorPause {
    pid: u32,
    resumer: std::process::Child,
}

impl EmulatorPause {
    /// Stops process `pid` for `seconds`.
    pub fn start(pid: u32, seconds: u64) -> EmulatorPause {
        let resumer = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("kill -STOP {pid} && sleep {seconds}; kill -CONT {pid}"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("starting the pause's shell");
        EmulatorPause { pid, resumer }
    }

    /// Whether the process is stopped now (state `T` in `/proc/<pid>/stat`).
    pub fn is_stopped(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // pid (comm) state …: the state follows the last ')'.
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    }

    /// Waits for the shell to resume the emulator (the pause's end).
    pub async fn finish(mut self) {
        while matches!(self.resumer.try_wait(), Ok(None)) {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

impl Drop for EmulatorPause {
    fn drop(&mut self) {
        signal(self.pid, "CONT");
        if matches!(self.resumer.try_wait(), Ok(None)) {
            let _ = self.resumer.kill();
            let _ = self.resumer.wait();
        }
    }
}
