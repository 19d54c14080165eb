//! `sessionlog memory`: the CLI contract (index, search JSON, get, status)
//! over the project's memory fixture workspace.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{arg, fixtures, json, run, run_ok};

/// A copy of `fixtures/memory-workspace` in a temp dir (the index goes into
/// the workspace's default state folder, so the fixture stays clean).
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    copy_dir(&fixtures::project_dir().join("fixtures/memory-workspace"), &ws);
    (dir, ws)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn memory_search_prints_openclaws_result_shape() {
    let (_d, ws) = workspace();
    let before = listing(&ws.join("memory"));
    run_ok(&["memory", "index", "--workspace", arg(&ws), "--provider", "hash"]);
    // The index lives in the state folder, never among the memory files.
    assert_eq!(listing(&ws.join("memory")), before);
    assert!(ws.join(".sessionlog/memory/index.sqlite").is_file());

    let out = json(&run_ok(&[
        "memory",
        "search",
        "--workspace",
        arg(&ws),
        "--provider",
        "hash",
        "Xcode keychain workaround",
        "--json",
    ]));
    let results = out["results"].as_array().expect("results array");
    assert!(!results.is_empty());
    let top = results[0].as_object().unwrap();
    let keys: Vec<&str> = top.keys().map(String::as_str).collect();
    assert_eq!(keys, ["path", "startLine", "endLine", "score", "snippet", "source"]);
    // The Xcode 17 keychain note is line 16 of memory/projects.md (`grep -n Xcode`).
    assert_eq!(top["path"], "memory/projects.md");
    assert!(top["startLine"].as_u64().unwrap() <= 16 && top["endLine"].as_u64().unwrap() >= 16);
    assert_eq!(top["source"], "memory");
    let score = top["score"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&score));
    // The snippet is the chunk's first 700 characters (the file is 951 bytes, all ASCII).
    let snippet = top["snippet"].as_str().unwrap();
    assert_eq!(snippet.chars().count(), 700);
    assert!(snippet.starts_with("# Projects\n"));

    // --max-results caps the list.
    let out = json(&run_ok(&[
        "memory",
        "search",
        "--workspace",
        arg(&ws),
        "--provider",
        "hash",
        "billing",
        "--max-results",
        "2",
        "--min-score",
        "0",
        "--json",
    ]));
    assert_eq!(out["results"].as_array().unwrap().len(), 2);
}

#[test]
fn memory_status_counts_files_and_dirty_ones() {
    let (_d, ws) = workspace();
    // An empty model folder: no local model, so the hashing embedder, and status says so.
    let no_model = tempfile::tempdir().unwrap();
    let m = arg(no_model.path());
    let status =
        |ws: &Path| json(&run_ok(&["memory", "status", "--workspace", arg(ws), "--model-dir", m, "--json"]));
    // Before indexing: the 8 Markdown files (MEMORY.md + 7 under memory/, counted with ls) are dirty.
    let s = status(&ws);
    assert_eq!(s["files"], 0);
    assert_eq!(s["dirtyFiles"].as_array().unwrap().len(), 8);
    run_ok(&["memory", "index", "--workspace", arg(&ws), "--model-dir", m]);
    let s = status(&ws);
    assert_eq!(s["provider"], "hash");
    assert_eq!(s["dimensions"], 384);
    assert_eq!(s["files"], 8);
    assert!(s["chunks"].as_u64().unwrap() >= 8);
    assert_eq!(s["dirtyFiles"], serde_json::json!([]));
    assert_eq!(s["fts"]["available"], true);
    assert_eq!(s["vector"]["available"], true);
    let fallback = s["fallback"].as_str().unwrap();
    assert!(fallback.contains("hashing") && fallback.contains(m), "{fallback}");
    // --provider local without the model: a clear error, exit 1.
    let out = run(&["memory", "status", "--workspace", arg(&ws), "--provider", "local", "--model-dir", m]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not installed"));
    // Chosen on purpose, the hashing embedder is no fallback.
    let s = json(&run_ok(&["memory", "status", "--workspace", arg(&ws), "--provider", "hash", "--json"]));
    assert_eq!((&s["provider"], &s["fallback"]), (&serde_json::json!("hash"), &serde_json::Value::Null));
    fs::write(ws.join("memory/2026-12-02.md"), "- new day\n").unwrap();
    fs::remove_file(ws.join("memory/people.md")).unwrap();
    let s = status(&ws);
    assert_eq!(s["dirtyFiles"], serde_json::json!(["memory/2026-12-02.md", "memory/people.md"]));
}

#[test]
fn memory_get_reads_lines_and_refuses_other_files() {
    let (_d, ws) = workspace();
    let out = run_ok(&[
        "memory",
        "get",
        "--workspace",
        arg(&ws),
        "memory/2026-11-30.md",
        "--from",
        "3",
        "--lines",
        "2",
    ]);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "- Incident: webhook deliveries to Stripe failed for 18 minutes after a DNS change.\n  Root cause: the new resolver did not forward to the internal zone. Rolled back at 14:32 UTC.\n"
    );
    let out = run(&["memory", "get", "--workspace", arg(&ws), "../etc/passwd.md"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("../etc/passwd.md"));
}

/// A loopback Ollama: answers every `/api/embed` with one (length, 1, 0) vector per input.
fn fake_ollama() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim_end().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let vectors: Vec<serde_json::Value> = body["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| serde_json::json!([t.as_str().unwrap().len(), 1, 0]))
                .collect();
            let reply = serde_json::json!({ "embeddings": vectors }).to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    url
}

#[test]
fn memory_index_through_an_ollama_server() {
    let (_d, ws) = workspace();
    let url = fake_ollama();
    let args = |cmd: &'static str| {
        vec!["memory", cmd, "--workspace", arg(&ws), "--provider", "ollama", "--base-url", &url]
    };
    run_ok(&[args("index"), vec!["--json"]].concat());
    let s = json(&run_ok(&[args("status"), vec!["--json"]].concat()));
    assert_eq!(s["provider"], "ollama");
    assert_eq!(s["model"], "nomic-embed-text");
    assert_eq!(s["dimensions"], 3);
    assert_eq!(s["fallback"], serde_json::Value::Null);
    assert_eq!(s["dirtyFiles"], serde_json::json!([]));
    // Back to the hashing embedder: another model, so everything is dirty.
    let s = json(&run_ok(&["memory", "status", "--workspace", arg(&ws), "--provider", "hash", "--json"]));
    assert_eq!(s["dirtyFiles"].as_array().unwrap().len(), 8);
    assert_eq!(s["indexModel"], "nomic-embed-text");
    // No server: a clear error naming the URL, exit 1.
    let out = run(&[
        "memory",
        "status",
        "--workspace",
        arg(&ws),
        "--provider",
        "ollama",
        "--base-url",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://127.0.0.1:9/api/embed"));
}

/// The installed local model's folder, or `None` after saying the test is skipped.
fn local_model() -> Option<PathBuf> {
    let dir = sessionlog_memory::local::model_dir(None)?;
    if sessionlog_memory::local::is_installed(&dir) {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: all-MiniLM-L6-v2 is not installed in {} (run scripts/fetch-minilm.sh)",
            dir.display()
        );
        None
    }
}

#[test]
fn memory_uses_the_installed_local_model_by_default() {
    let Some(model) = local_model() else { return };
    let (_d, ws) = workspace();
    let m = arg(&model);
    run_ok(&["memory", "index", "--workspace", arg(&ws), "--model-dir", m]);
    let s = json(&run_ok(&["memory", "status", "--workspace", arg(&ws), "--model-dir", m, "--json"]));
    assert_eq!(s["provider"], "local");
    assert_eq!(s["model"], "all-MiniLM-L6-v2");
    assert_eq!(s["dimensions"], 384);
    assert_eq!(s["fallback"], serde_json::Value::Null);
    assert_eq!(s["dirtyFiles"], serde_json::json!([]));
    // A question sharing no word with its answer: the Stripe webhook incident is
    // lines 3-4 of memory/2026-11-30.md (read above).
    let out = json(&run_ok(&[
        "memory",
        "search",
        "--workspace",
        arg(&ws),
        "--model-dir",
        m,
        "when did payment notifications stop arriving",
        "--json",
    ]));
    let top = &out["results"][0];
    assert_eq!(top["path"], "memory/2026-11-30.md", "{out}");
    // The hashing embedder's index is another model's: everything is dirty for it.
    let s = json(&run_ok(&["memory", "status", "--workspace", arg(&ws), "--provider", "hash", "--json"]));
    assert_eq!(s["dirtyFiles"].as_array().unwrap().len(), 8);
    assert_eq!(s["indexModel"], "all-MiniLM-L6-v2");
}

#[test]
fn memory_search_is_the_same_with_sqlite_vec_and_brute_force() {
    let (_d, ws) = workspace();
    run_ok(&["memory", "index", "--workspace", arg(&ws), "--provider", "hash"]);
    let status = |extra: &[&str]| {
        let mut a = vec!["memory", "status", "--workspace", arg(&ws), "--provider", "hash", "--json"];
        a.extend_from_slice(extra);
        json(&run_ok(&a))
    };
    // The default build carries sqlite-vec, used from 60,000 chunks on (or
    // --knn-min-chunks); --brute-force turns its KNN off.
    let s = status(&["--knn-min-chunks", "0"]);
    assert_eq!(
        (&s["vector"]["backend"], &s["vector"]["loadError"]),
        (&"sqlite-vec".into(), &serde_json::Value::Null)
    );
    assert_eq!(status(&[])["vector"]["backend"], "brute-force", "a small index is scanned exactly");
    assert_eq!(status(&["--brute-force", "--knn-min-chunks", "0"])["vector"]["backend"], "brute-force");
    for query in ["Xcode keychain workaround", "billing", "who owns the deploy", "迁移"] {
        let search = |extra: &[&str]| {
            let mut a = vec![
                "memory",
                "search",
                "--workspace",
                arg(&ws),
                "--provider",
                "hash",
                query,
                "--min-score",
                "0",
                "--max-results",
                "20",
                "--json",
            ];
            a.extend_from_slice(extra);
            json(&run_ok(&a))
        };
        let (knn, brute) = (search(&["--knn-min-chunks", "0"]), search(&["--brute-force"]));
        assert!(!knn["results"].as_array().unwrap().is_empty(), "{query}");
        assert_eq!(knn, brute, "{query}");
    }
}
