//! The HTTP embedding providers against a fake server on loopback: the
//! request each API expects, the answer mapped back in order, retries on 429
//! and 5xx, errors that name the URL and status, and an index built through
//! the provider.
#![cfg(feature = "remote")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sessionlog_memory::remote::{RemoteConfig, RemoteEmbedder};
use sessionlog_memory::{Embedder, IndexConfig, MemoryIndex, SearchSettings};

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
    body: Value,
}

/// A loopback server answering each connection with the next scripted
/// `(status, body)`, or with `answer(body)` once the script is used up.
struct Fake {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn fake(script: Vec<(u16, String)>, answer: fn(&Value) -> Value) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut script = script.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let path = request_line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let (mut length, mut authorization) = (0usize, None);
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                let (k, v) = line.split_once(':').unwrap();
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap(),
                    "authorization" => authorization = Some(v.trim().to_owned()),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            let (status, reply) = script.next().unwrap_or_else(|| (200, answer(&body).to_string()));
            log.lock().unwrap().push(Seen { path, authorization, body });
            let response = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    Fake { url, seen }
}

/// A 3-dimensional vector per input text: (length, index, 1).
fn vectors(body: &Value) -> Vec<Value> {
    let input = body["input"].as_array().unwrap();
    input.iter().enumerate().map(|(i, t)| json!([t.as_str().unwrap().len() as f64, i as f64, 1.0])).collect()
}

fn openai_answer(body: &Value) -> Value {
    // Listed in reverse: the client orders by `index`.
    let data: Vec<Value> = vectors(body)
        .into_iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .rev()
        .collect();
    json!({"object": "list", "data": data, "model": body["model"]})
}

fn ollama_answer(body: &Value) -> Value {
    json!({"model": body["model"], "embeddings": vectors(body)})
}

fn config(url: &str, model: &str) -> RemoteConfig {
    RemoteConfig { retry_delay: Duration::from_millis(1), ..RemoteConfig::new(url, model) }
}

#[test]
fn openai_request_and_answer() {
    let server = fake(vec![], openai_answer);
    let mut c = config(&format!("{}/v1", server.url), "openai/text-embedding-3-small");
    c.api_key = Some("sk-test".into());
    c.dimensions = Some(3);
    let e = RemoteEmbedder::openai(c).unwrap();
    assert_eq!((e.id(), e.model(), e.dims()), ("openai", "text-embedding-3-small", 3));
    let v = e.embed_batch(&["ab", "abcd"]).unwrap();
    // Stored as returned (not normalised), in input order.
    assert_eq!(v, vec![vec![2.0, 0.0, 1.0], vec![4.0, 1.0, 1.0]]);
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/embeddings");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(
        seen[0].body,
        json!({"model": "text-embedding-3-small", "input": ["ab", "abcd"], "dimensions": 3})
    );
    // The cache key never holds the API key.
    assert!(!e.provider_key().contains("sk-test"));
}

#[test]
fn ollama_probes_dimensions_and_normalises() {
    let server = fake(vec![], ollama_answer);
    let e = RemoteEmbedder::ollama(config(&server.url, "nomic-embed-text")).unwrap();
    // One probe request ("ping") gave the length.
    assert_eq!(e.dims(), 3);
    let v = e.embed_query("abc").unwrap();
    // (3, 0, 1) / sqrt(10).
    let n = 10f64.sqrt();
    let want = [3.0 / n, 0.0, 1.0 / n];
    assert!(v.iter().zip(want).all(|(a, b)| (f64::from(*a) - b).abs() < 1e-6), "{v:?}");
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/api/embed", "/api/embed"]);
    assert_eq!(seen[0].body, json!({"model": "nomic-embed-text", "input": ["ping"]}));
    assert_eq!(seen[1].body, json!({"model": "nomic-embed-text", "input": ["abc"]}));
    assert_eq!(seen[0].authorization, None);
}

#[test]
fn retries_rate_limits_and_server_errors_then_gives_up_with_the_status() {
    let server = fake(vec![(429, "{}".into()), (503, "{}".into())], openai_answer);
    let mut c = config(&server.url, "m");
    c.dimensions = Some(3);
    let e = RemoteEmbedder::openai(c).unwrap();
    assert_eq!(e.embed_batch(&["x"]).unwrap().len(), 1);
    assert_eq!(server.seen.lock().unwrap().len(), 3);

    let server = fake(
        vec![(500, "{}".into()), (500, "{}".into()), (500, "{}".into()), (500, "boom".into())],
        openai_answer,
    );
    let mut c = config(&server.url, "m");
    c.dimensions = Some(3);
    let err = RemoteEmbedder::openai(c).unwrap().embed_batch(&["x"]).unwrap_err().to_string();
    assert!(err.contains("/embeddings: HTTP 500: boom"), "{err}");
    assert_eq!(server.seen.lock().unwrap().len(), 4);

    // A client error is not retried.
    let server = fake(vec![(401, r#"{"error":"bad key"}"#.into())], openai_answer);
    let mut c = config(&server.url, "m");
    c.dimensions = Some(3);
    let err = RemoteEmbedder::openai(c).unwrap().embed_batch(&["x"]).unwrap_err().to_string();
    assert!(err.contains("HTTP 401") && err.contains("bad key"), "{err}");
    assert_eq!(server.seen.lock().unwrap().len(), 1);
}

#[test]
fn a_wrong_answer_is_an_error_not_a_panic() {
    let server = fake(vec![(200, r#"{"data":[]}"#.into()), (200, "not json".into())], openai_answer);
    let mut c = config(&server.url, "m");
    c.dimensions = Some(3);
    let e = RemoteEmbedder::openai(c).unwrap();
    assert!(e.embed_batch(&["x"]).unwrap_err().to_string().contains("0 vectors for 1 texts"));
    assert!(e.embed_batch(&["x"]).unwrap_err().to_string().contains("not JSON"));
}

#[test]
fn an_index_built_through_ollama() {
    let server = fake(vec![], ollama_answer);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "The billing database is PostgreSQL.\n").unwrap();
    std::fs::write(ws.join("memory/notes.md"), "Deploys happen on Tuesdays.\n").unwrap();
    let e = RemoteEmbedder::ollama(config(&server.url, "nomic-embed-text")).unwrap();
    let mut index = MemoryIndex::open(IndexConfig::new(&ws, None), Box::new(e)).unwrap();
    let r = index.sync(false, 0).unwrap();
    assert_eq!(r.embedded, 2);
    let hits = index.search("billing database", &SearchSettings::default(), 0).unwrap();
    assert!(hits.iter().any(|h| h.path == "MEMORY.md"));
    // The probe, one request per file (files are embedded one at a time; a
    // chunk keeps the empty segment after the last newline, as upstream), the query.
    let seen = server.seen.lock().unwrap().clone();
    let inputs: Vec<&Value> = seen.iter().map(|s| &s.body["input"]).collect();
    assert_eq!(inputs.len(), 4);
    assert_eq!(*inputs[1], json!(["The billing database is PostgreSQL.\n"]));
    assert_eq!(*inputs[2], json!(["Deploys happen on Tuesdays.\n"]));
    assert_eq!(*inputs[3], json!(["billing database"]));
    let status = index.status().unwrap();
    assert_eq!(
        (status.provider.as_str(), status.model.as_str(), status.dimensions),
        ("ollama", "nomic-embed-text", 3)
    );
}
