//! Every command against hostile input, as a table: (command, arguments,
//! input) → exit code, a fragment of stderr (said once), and every file of the
//! scratch folder byte for byte as it was (the tree is hashed before and
//! after; a row names the few paths it may change, e.g. a store's own files).
//!
//! Inputs: session ids and `sessionFile`s with `..`, separators, absolute
//! paths and NUL; symlinked transcripts, lock files and outputs; a 5 MB line;
//! 100,000 levels of nesting; invalid UTF-8; raw NUL bytes; existing output
//! files; counts beyond any size.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::bin;

const HEADER: &str = r#"{"type":"session","version":3,"id":"c0ffee00-0000-4000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

fn message(id: &str, parent: Option<&str>, message: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{message}}}"#
    )
}

/// A small valid transcript: header, a user message, an assistant reply.
fn transcript() -> String {
    [
        HEADER.to_owned(),
        message("00000001", None, r#"{"role":"user","content":"hello","timestamp":1}"#),
        message(
            "00000002",
            Some("00000001"),
            r#"{"role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":6},"stopReason":"stop","timestamp":2}"#,
        ),
    ]
    .join("\n")
        + "\n"
}

/// `transcript()` with `line` (raw bytes) as its fourth and last line.
fn transcript_with(line: &[u8]) -> Vec<u8> {
    let mut out = transcript().into_bytes();
    out.extend_from_slice(line);
    out.push(b'\n');
    out
}

const DEPTH: usize = 100_000;

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// The scratch folder every row starts from: transcripts good and hostile, a
/// victim file outside every sessions folder, links, stores, a workspace.
fn scratch(d: &Path) {
    write(&d.join("t.jsonl"), transcript());
    let deep = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    write(
        &d.join("deep.jsonl"),
        transcript_with(
            message(
                "00000009",
                Some("00000002"),
                &format!(r#"{{"role":"user","content":{deep},"timestamp":1}}"#),
            )
            .as_bytes(),
        ),
    );
    let mut bad = message("00000009", Some("00000002"), r#"{"role":"user","content":"caf"#).into_bytes();
    bad.truncate(bad.len() - 1); // drop the closing quote and brace, put invalid UTF-8 in the text
    let cut = bad.len() - 1;
    bad.truncate(cut);
    bad.extend_from_slice(b"\xff\xfe\xc3\x28 e\",\"timestamp\":1}}");
    write(&d.join("utf8.jsonl"), transcript_with(&bad));
    write(
        &d.join("nul.jsonl"),
        transcript_with(
            message("00000009", Some("00000002"), "{\"role\":\"user\",\"content\":\"a\0b\",\"timestamp\":1}")
                .as_bytes(),
        ),
    );
    let garbage: Vec<u8> = (0..5 * 1024 * 1024).map(|i| b"x{[\"0:,"[i % 7]).collect();
    write(&d.join("huge.jsonl"), transcript_with(&garbage));
    write(&d.join("binary.bin"), (0..=255u8).cycle().take(4096).collect::<Vec<_>>());
    // Something outside every sessions folder that nothing may touch.
    write(&d.join("outside/victim.jsonl"), transcript());
    write(&d.join("outside/victim.md"), "# not yours\n");
    symlink(d.join("outside/victim.jsonl"), d.join("link.jsonl")).unwrap();
    // A lock file that is a link to the victim (fresh, so it is not stale).
    write(&d.join("locked.jsonl"), transcript());
    symlink(d.join("outside/victim.jsonl"), d.join("locked.jsonl.lock")).unwrap();
    // Existing outputs.
    write(&d.join("existing.out"), "precious\n");
    symlink(d.join("outside/victim.jsonl"), d.join("link.out")).unwrap();
    // A segment to unpack.
    let packed = Command::new(bin())
        .args(["pack", d.join("t.jsonl").to_str().unwrap(), "-o", d.join("t.slmp").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(packed.status.success(), "{}", String::from_utf8_lossy(&packed.stderr));
    // Stores whose log carries hostile ids and files.
    let hostile_entries = [
        ("agent:main:dots", r#"{"sessionId":"../../../outside/victim","updatedAt":1}"#.to_owned()),
        ("agent:main:slash", r#"{"sessionId":"a/b","updatedAt":1}"#.to_owned()),
        ("agent:main:nul", r#"{"sessionId":"a\u0000b","updatedAt":1}"#.to_owned()),
        (
            "agent:main:file",
            r#"{"sessionId":"s1","sessionFile":"../../../outside/victim.jsonl","updatedAt":1}"#.to_owned(),
        ),
        (
            "agent:main:abs",
            format!(
                r#"{{"sessionId":"s2","sessionFile":"{}","updatedAt":1}}"#,
                d.join("outside/victim.jsonl").display()
            ),
        ),
        (
            "agent:main:filenul",
            r#"{"sessionId":"s3","sessionFile":"s3\u0000.jsonl","updatedAt":1}"#.to_owned(),
        ),
    ];
    let mut log = String::new();
    for (key, entry) in &hostile_entries {
        log.push_str(&format!(r#"{{"type":"imported","key":"{key}","entry":{entry}}}"#));
        log.push('\n');
    }
    write(&d.join("store/agents/main/sessions/events.jsonl"), &log);
    // A store whose session transcript is a link to the victim.
    let linked = r#"{"type":"created","key":"agent:main:main","sessionId":"s9","at":1,"reason":"inbound"}"#;
    write(&d.join("linkstore/agents/main/sessions/events.jsonl"), format!("{linked}\n"));
    symlink(d.join("outside/victim.jsonl"), d.join("linkstore/agents/main/sessions/s9.jsonl")).unwrap();
    // An OpenClaw state folder (sessions.json) with a hostile id, to import.
    write(
        &d.join("state/agents/main/sessions/sessions.json"),
        r#"{"agent:main:main":{"sessionId":"../../../outside/victim","updatedAt":1}}"#,
    );
    write(
        &d.join("state-nul/agents/main/sessions/sessions.json"),
        r#"{"agent:main:main":{"sessionId":"a\u0000b","updatedAt":1}}"#,
    );
    // A memory workspace with a link out of it.
    write(&d.join("ws/MEMORY.md"), "# memory\nline two\n");
    write(&d.join("ws/memory/bad.md"), b"caf\xff\xfe\n");
    symlink(d.join("outside/victim.md"), d.join("ws/memory/link.md")).unwrap();
}

/// A file-system node as it was: bytes, link target, or folder.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Link(PathBuf),
    Dir,
}

fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeMap<PathBuf, Node>) {
        for e in fs::read_dir(at).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_owned();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(rel, Node::Link(fs::read_link(&path).unwrap()));
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir);
                walk(root, &path, out);
            } else {
                out.insert(rel, Node::File(fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// One row: the command line (`{d}` is the scratch folder), stdin, the exit
/// code, a fragment stderr holds exactly once ("" when stderr may be empty),
/// and the paths (prefixes, relative to the scratch folder) it may change.
struct Row {
    args: &'static str,
    stdin: &'static [u8],
    code: i32,
    stderr: &'static str,
    may_change: &'static [&'static str],
}

const fn row(args: &'static str, code: i32, stderr: &'static str) -> Row {
    Row { args, stdin: b"", code, stderr, may_change: &[] }
}

const READERS: [&str; 5] = [
    "inspect {f} --json",
    "entries {f} --jsonl",
    "context {f} --json",
    "cut {f} --json",
    "replay {f} --json",
];

/// The table (every command of `sessionlog --help`; the reading commands on every hostile transcript below).
fn rows() -> Vec<Row> {
    let mut rows = vec![
        // Readers on the hostile transcripts: (file, exit code per reader, fragment).
        // Deep nesting: read as Pi reads it (JSON.parse is not recursive); printing the
        // context fails as Pi's does, with the file, message and reason.
        row("context {d}/deep.jsonl --json", 1, "deep.jsonl: messages[2]: JSON nested deeper than 1000 levels"),
        // Raw NUL inside a string is not JSON: the line is dropped as Pi drops it.
        row("entries {d}/nul.jsonl --jsonl", 0, ""),
        // Strict readers name the file and line.
        row("pack {d}/nul.jsonl -o {d}/new.slmp", 1, "nul.jsonl:4"),
        row("pack {d}/utf8.jsonl -o {d}/new.slmp", 1, "invalid UTF-8"),
        row("pack {d}/huge.jsonl -o {d}/new.slmp", 1, "huge.jsonl:4"),
        row("inspect {d}/binary.bin", 1, "binary.bin:-: not a Pi transcript"),
        row("inspect {d}/missing.jsonl", 1, "missing.jsonl: No such file or directory (os error 2)"),
        // Symlinked transcripts are read (the user named them), never written.
        row("inspect {d}/link.jsonl --json", 0, ""),
        // A lock file that is a link to another file: the target is untouched.
        Row {
            stdin: b"{\"type\":\"custom\",\"customType\":\"x\",\"id\":\"00000003\",\"parentId\":\"00000002\",\"timestamp\":\"2026-01-01T00:00:02.000Z\"}\n",
            ..row("append {d}/locked.jsonl --lock-timeout-ms 200", 1, "session file locked (timeout 200ms)")
        },
        row("compact {d}/locked.jsonl --lock-timeout-ms 200", 1, "session file locked (timeout 200ms)"),
        // A bad line on stdin: nothing of its batch is written.
        Row { stdin: b"{\"type\":\"custom\",\"id\":\"00000003\"}\nnot json\n", ..row("append {d}/t.jsonl --batch 10", 1, "<stdin>:2: invalid JSON") },
        Row { stdin: b"caf\xff\xfe\n", ..row("append {d}/t.jsonl", 1, "<stdin>:1: invalid UTF-8 at byte 4") },
        // Existing outputs are refused, links included; nothing is written anywhere.
        row("gen -o {d}/existing.out", 1, "existing.out: exists; not replaced (--force replaces it)"),
        row("gen -o {d}/link.out", 1, "link.out: exists; not replaced"),
        row("pack {d}/t.jsonl -o {d}/existing.out", 1, "existing.out: exists; not replaced"),
        row("pack {d}/t.jsonl -o {d}/link.out", 1, "link.out: exists; not replaced"),
        row("unpack {d}/t.slmp -o {d}/existing.out", 1, "existing.out: exists; not replaced"),
        row("replay {d}/t.jsonl --events-out {d}/existing.out", 1, "existing.out: exists; not replaced"),
        row("replay {d}/t.jsonl --events-out {d}/link.out", 1, "link.out: exists; not replaced"),
        Row { may_change: &["existing.out"], ..row("gen --entries 3 -o {d}/existing.out --force", 0, "") },
        // Counts beyond any size: a bounded, clear error.
        row("gen --entries 18446744073709551615", 1, "--entries 18446744073709551615: at most 1000000 entries"),
        row("gen --tool-output-chars 18446744073709551615", 1, "--tool-output-chars 18446744073709551615: at most"),
        row("gen --entries -1", 2, "unexpected argument '-1'"),
        // Segments.
        row("unpack {d}/t.jsonl", 1, "t.jsonl: not a sessionlog MessagePack segment (bad magic)"),
        row("unpack {d}/binary.bin", 1, "binary.bin: not a sessionlog MessagePack segment (bad magic)"),
        // Folders of transcripts.
        row("sweep {d}/deep.jsonl", 0, ""),
        row("calibrate {d}/binary.bin", 1, "binary.bin"),
        // Stores with hostile ids and files: read, nothing outside touched.
        row("sessions --store {d}/store", 0, ""),
        // `usage` records what the transcripts say: the store's own files only.
        Row { may_change: &["store/agents/main/sessions/"], ..row("usage --store {d}/store", 0, "") },
        Row { may_change: &["store/agents/main/sessions/"], ..row("sessions --store {d}/store --rebuild", 0, "") },
        Row {
            may_change: &["store/agents/main/sessions/"],
            ..row("cleanup --store {d}/store --enforce --now 2026-12-01T00:00:00Z --prune-after 1d", 0, "")
        },
        Row {
            may_change: &["store/agents/main/sessions/"],
            ..row("turn --store {d}/store --body /new --apply --now 2026-12-01T00:00:00Z agent:main:file", 0, "")
        },
        Row {
            may_change: &["store/agents/main/sessions/"],
            ..row("patch --store {d}/store --set label=x agent:main:dots", 0, "")
        },
        // OpenClaw (and `import`) refuse a session id that cannot name a
        // transcript: so does `export`, naming the key, before it writes.
        row(
            "export --store {d}/store --to {d}/exported --now 2026-12-01T00:00:00Z",
            1,
            "agent:main:dots: Invalid session ID: \"../../../outside/victim\"; OpenClaw refuses it",
        ),
        // A session transcript that is a link out of the store: a reset archives
        // (renames) the link; the file it points to is untouched.
        Row {
            may_change: &["linkstore/agents/main/sessions/"],
            ..row("turn --store {d}/linkstore --body /new --apply --now 2026-12-01T00:00:00Z agent:main:main", 0, "")
        },
        Row {
            may_change: &["linkstore/agents/main/sessions/"],
            ..row("cleanup --store {d}/linkstore --enforce --now 2026-12-01T00:00:00Z --prune-after 1d", 0, "")
        },
        // Hostile keys.
        row("patch --store {d}/store --set label=x agent:main:../../x", 1, "invalid session key"),
        row("turn --store {d}/store --body hi agent:main:a\u{1}b", 1, "invalid session key"),
        row("key parse agent:main:../../etc", 0, ""),
        row("key route --channel ../x --peer /etc/passwd", 0, ""),
        // Imports whose sessions.json names ids that are not file names.
        row("import {d}/state --into {d}/imported", 1, "Invalid session ID: \"../../../outside/victim\""),
        row("import {d}/state-nul --into {d}/imported", 1, "Invalid session ID"),
        // Memory paths out of the workspace.
        row("memory get --workspace {d}/ws ../outside/victim.md", 1, "../outside/victim.md"),
        row("memory get --workspace {d}/ws memory/link.md", 1, "memory/link.md"),
        row("memory get --workspace {d}/ws /etc/passwd", 1, "/etc/passwd"),
        row("memory get --workspace {d}/ws memory/bad.md", 0, ""),
    ];
    for f in ["deep", "utf8", "nul", "huge"] {
        for reader in READERS {
            // Exit 0, or exit 1 naming the file: checked in `run_row`; any exit but 0 or 1 fails.
            let args: &'static str =
                Box::leak(reader.replace("{f}", &format!("{{d}}/{f}.jsonl")).into_boxed_str());
            let code = if f == "deep" && reader.starts_with("context") { 1 } else { 0 };
            rows.push(Row { args, stdin: b"", code, stderr: "", may_change: &[] });
        }
    }
    rows
}

/// Runs one row in a fresh scratch folder; returns the failures.
fn run_row(r: &Row) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    scratch(d);
    let before = tree(d);
    let args: Vec<String> = r.args.split(' ').map(|a| a.replace("{d}", d.to_str().unwrap())).collect();
    let mut child = Command::new(bin())
        .args(&args)
        .current_dir(d)
        .env("SESSIONLOG_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(r.stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(d.to_str().unwrap(), "{d}");
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("`{}`: {what}\n  stderr: {stderr}", r.args));
    if out.status.code() != Some(r.code) {
        fail(format!("exit {:?}, expected {}", out.status.code(), r.code));
    }
    if stderr.contains("panicked") || stderr.contains("fatal runtime error") {
        fail("panicked".into());
    }
    if !r.stderr.is_empty() && stderr.matches(r.stderr).count() != 1 {
        fail(format!("stderr does not hold {:?} exactly once", r.stderr));
    }
    if r.code == 1 && !stderr.starts_with("sessionlog: ") {
        fail("the error is not sessionlog's".into());
    }
    // Every error says each reason once (no "X: X").
    if let Some(message) = stderr.lines().last().and_then(|l| l.strip_prefix("sessionlog: ")) {
        let parts: Vec<&str> = message.split(": ").collect();
        if parts.windows(2).any(|w| w[0] == w[1]) {
            fail("a reason is repeated".into());
        }
    }
    let after = tree(d);
    let allowed =
        |p: &Path| r.may_change.iter().any(|m| p.starts_with(m) || p.to_string_lossy().starts_with(m));
    for (path, node) in &before {
        match after.get(path) {
            Some(n) if n == node => {}
            _ if allowed(path) => {}
            Some(_) => fail(format!("{} changed", path.display())),
            None => fail(format!("{} removed", path.display())),
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p) && !allowed(p)) {
        fail(format!("{} created", path.display()));
    }
    failures
}

#[test]
fn every_command_refuses_hostile_input_and_changes_nothing_it_should_not() {
    let rows = rows();
    let commands: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.args.split(' ').next().unwrap()).collect();
    // Every command but `run` (its own test below, as it needs a model server).
    let listed = [
        "append",
        "calibrate",
        "cleanup",
        "compact",
        "context",
        "cut",
        "entries",
        "export",
        "gen",
        "import",
        "inspect",
        "key",
        "memory",
        "pack",
        "patch",
        "replay",
        "sessions",
        "sweep",
        "turn",
        "unpack",
        "usage",
    ];
    assert_eq!(commands.into_iter().collect::<Vec<_>>(), listed);
    let failures: Vec<String> = crate::support::par_map(&rows, run_row).into_iter().flatten().collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// `run` (the live loop, against the fake model server): a session whose
/// transcript in the sessions folder is a link to a file outside it, or whose
/// folder on the way is one, is refused before the model is asked and before
/// the turn is recorded; nothing changes, neither the store nor the file the
/// link points to.
#[test]
fn run_refuses_to_write_a_session_through_a_symbolic_link() {
    use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fake = FakeLlm::start();
    fs::create_dir_all(d.join("ws")).unwrap();
    let cfg = d.join("agent.toml");
    fs::write(
        &cfg,
        format!(
            "state_dir = \"state\"\nagent = \"main\"\nworkspace = \"ws\"\n[model]\napi = \"openai-completions\"\nbase_url = \"{}\"\nmodel = \"m\"\ncontext_window = 128000\nmax_tokens = 4096\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    let run = |session: &str| {
        Command::new(bin())
            .args(["run", "--config", cfg.to_str().unwrap(), "--message", "hi", "--session", session])
            .current_dir(d)
            .output()
            .unwrap()
    };
    // Two sessions recorded normally: the link will be the transcript of one,
    // and a folder on the way (`sessionFile` sub/…) of the other.
    for session in ["agent:main:main", "agent:main:other"] {
        fake.push(Reply::turn(Turn::text("Hello.").usage(10, 3)));
        let out = run(session);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let sessions = d.join("state/agents/main/sessions");
    let store: serde_json::Value =
        serde_json::from_slice(&fs::read(sessions.join("sessions.json")).unwrap()).unwrap();
    let main_id = store["agent:main:main"]["sessionId"].as_str().unwrap().to_owned();
    write(&d.join("outside/victim.jsonl"), transcript());
    let transcript_file = sessions.join(format!("{main_id}.jsonl"));
    fs::remove_file(&transcript_file).unwrap();
    symlink(d.join("outside/victim.jsonl"), &transcript_file).unwrap();
    let before = tree(d);
    fake.push(Reply::turn(Turn::text("Through the link.").usage(10, 3)));
    let out = run("agent:main:main");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("{main_id}.jsonl is a symbolic link; not written through")), "{stderr}");
    // Nothing is recorded for the refused turn: not even the store's own
    // log and projection change.
    assert_eq!(tree(d), before, "run changed files");
}
