//! Any text as a session key, a session id and a `sessionFile`: the key
//! grammar never panics, and a transcript path never leaves its folder.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use sessionlog_sessions::keys::{key_info, normalize_key, validate_session_id};
use sessionlog_sessions::paths::transcript_path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = key_info(&text);
    let _ = normalize_key(&text);
    let _ = validate_session_id(&text);
    let (id, file) = text.split_once('\n').unwrap_or((&text, ""));
    let dir = Path::new("/state/agents/main/sessions");
    for file in [None, Some(file)] {
        if let Ok(path) = transcript_path(dir, id, file) {
            let rest = path.strip_prefix(dir).expect("inside the sessions folder");
            assert!(rest.components().all(|c| matches!(c, Component::Normal(_))), "{path:?}");
            assert!(!rest.as_os_str().is_empty(), "{path:?}");
        }
    }
});
