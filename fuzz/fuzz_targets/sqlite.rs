//! Any bytes as an OpenClaw agent database: opened read-only, its session
//! entries and every transcript read.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use sessionlog_sqlite_store::AgentDatabase;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openclaw-agent.sqlite");
    std::fs::write(&path, data).unwrap();
    let Ok(db) = AgentDatabase::open(&path) else { return };
    let _ = db.schema_version();
    let _ = db.agent_id();
    let _ = db.nodes();
    let _ = db.entries();
    let _ = db.windows();
    if let Ok(ids) = db.transcript_ids() {
        for id in ids.iter().take(50) {
            if let Ok(mut reader) = db.transcript(id) {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            }
        }
    }
});
