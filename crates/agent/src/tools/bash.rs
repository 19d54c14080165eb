//! Pi's `bash`: a command run by `bash -c` in the workspace, stdout and
//! stderr interleaved, the last 2000 lines or 50 KB kept (the whole output
//! goes to a temporary file once it is larger), a timeout (the call's
//! `timeout`, else the configured default) that kills the command's
//! process group, and Pi's texts for a failed, timed-out or aborted command.

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sessionlog_provider::CancellationToken;

use super::truncate::{format_size, truncate_tail, TruncatedBy, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::{number_prop, object_schema, string_prop, Tool, ToolFuture, ToolOutput, Workspace};

/// Pi's `bash` tool.
#[derive(Debug, Clone)]
pub struct Bash {
    workspace: Workspace,
    default_timeout: Option<f64>,
}

impl Bash {
    /// `bash` running in `workspace`; `default_timeout` (seconds) applies
    /// when a call names none (Pi has none by default).
    pub fn new(workspace: Workspace, default_timeout: Option<f64>) -> Bash {
        Bash { workspace, default_timeout }
    }
}

/// How a command ended.
enum End {
    Exited(Option<i32>),
    TimedOut,
    Aborted,
}

fn kill_group(pgid: u32) {
    // The command leads its own process group; kill every process in it.
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).status();
}

fn temp_path() -> std::path::PathBuf {
    use sha2::Digest;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{}:{nanos}:{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let hash = sha2::Sha256::digest(seed.as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir().join(format!("sessionlog-bash-{hex}.log"))
}

/// Output kept while a command runs: a rolling buffer of about twice the
/// byte limit, and the whole output in a file once it passes the limit.
struct Collected {
    chunks: std::collections::VecDeque<Vec<u8>>,
    kept: usize,
    total: usize,
    file: Option<(std::path::PathBuf, std::fs::File)>,
}

impl Collected {
    fn push(&mut self, data: Vec<u8>) {
        use std::io::Write as _;
        self.total += data.len();
        if self.total > DEFAULT_MAX_BYTES && self.file.is_none() {
            let path = temp_path();
            if let Ok(mut f) = std::fs::File::create(&path) {
                for c in &self.chunks {
                    let _ = f.write_all(c);
                }
                self.file = Some((path, f));
            }
        }
        if let Some((_, f)) = &mut self.file {
            let _ = f.write_all(&data);
        }
        self.kept += data.len();
        self.chunks.push_back(data);
        while self.kept > DEFAULT_MAX_BYTES * 2 && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.kept -= old.len();
            }
        }
    }

    fn text(&self) -> String {
        let bytes: Vec<u8> = self.chunks.iter().flatten().copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

fn run(
    root: &std::path::Path,
    command: &str,
    timeout: Option<f64>,
    cancel: &CancellationToken,
) -> Result<ToolOutput, String> {
    if !root.is_dir() {
        return Err(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            root.display()
        ));
    }
    let shell = if std::path::Path::new("/bin/bash").exists() { "/bin/bash" } else { "sh" };
    let mut child = Command::new(shell)
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| e.to_string())?;
    let pgid = child.id();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let mut readers = Vec::new();
    let pipes: Vec<Box<dyn std::io::Read + Send>> = [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    for mut pipe in pipes {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    // A timeout too large for a `Duration` or an `Instant` (the model may send
    // `1e20`) means no deadline, never a panic with the child already running.
    let deadline = timeout
        .filter(|t| *t > 0.0)
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .and_then(|d| Instant::now().checked_add(d));
    let mut out = Collected { chunks: Default::default(), kept: 0, total: 0, file: None };
    let mut killed: Option<End> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(data) => out.push(data),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if killed.is_none() {
            if cancel.is_cancelled() {
                kill_group(pgid);
                killed = Some(End::Aborted);
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                kill_group(pgid);
                killed = Some(End::TimedOut);
            }
        }
    }
    for r in readers {
        let _ = r.join();
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let end = killed.unwrap_or(End::Exited(status.code()));
    let full = out.text();
    let temp =
        out.file.as_ref().map(|(p, _)| p.display().to_string()).unwrap_or_else(|| "undefined".to_owned());
    match end {
        End::Aborted => Err(format!(
            "{}Command aborted",
            if full.is_empty() { String::new() } else { format!("{full}\n\n") }
        )),
        End::TimedOut => {
            let secs = sessionlog_events::json::js_number(timeout.unwrap_or(0.0));
            Err(format!(
                "{}Command timed out after {secs} seconds",
                if full.is_empty() { String::new() } else { format!("{full}\n\n") }
            ))
        }
        End::Exited(code) => {
            let t = truncate_tail(&full, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
            let mut text = if t.content.is_empty() { "(no output)".to_owned() } else { t.content.clone() };
            let mut details = None;
            if t.truncated {
                let start = t.total_lines - t.output_lines + 1;
                let end = t.total_lines;
                if t.last_line_partial {
                    let last = full.rsplit('\n').next().unwrap_or("");
                    text.push_str(&format!(
                        "\n\n[Showing last {} of line {end} (line is {}). Full output: {temp}]",
                        format_size(t.output_bytes),
                        format_size(last.len())
                    ));
                } else if t.truncated_by == Some(TruncatedBy::Lines) {
                    text.push_str(&format!(
                        "\n\n[Showing lines {start}-{end} of {}. Full output: {temp}]",
                        t.total_lines
                    ));
                } else {
                    text.push_str(&format!(
                        "\n\n[Showing lines {start}-{end} of {} ({} limit). Full output: {temp}]",
                        t.total_lines,
                        format_size(DEFAULT_MAX_BYTES)
                    ));
                }
                let mut d = serde_json::Map::new();
                d.insert("truncation".into(), t.to_json());
                if let Some((p, _)) = &out.file {
                    d.insert("fullOutputPath".into(), json!(p.display().to_string()));
                }
                details = Some(Value::Object(d));
            }
            match code {
                Some(c) if c != 0 => Err(format!("{text}\n\nCommand exited with code {c}")),
                _ => Ok(ToolOutput { content: vec![json!({"type": "text", "text": text})], details }),
            }
        }
    }
}

impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> String {
        format!(
            "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.",
            DEFAULT_MAX_BYTES / 1024
        )
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("command", string_prop("Bash command to execute")),
                ("timeout", number_prop("Timeout in seconds (optional, no default timeout)")),
            ],
            &["command"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = args["command"].as_str().unwrap_or_default().to_owned();
            let timeout = args.get("timeout").and_then(Value::as_f64).or(self.default_timeout);
            let root = self.workspace.root().to_owned();
            tokio::task::spawn_blocking(move || run(&root, &command, timeout, &cancel))
                .await
                .map_err(|e| e.to_string())?
        })
    }
}
