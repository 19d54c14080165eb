//! Any bytes as a transcript file: read (lenient and strict), then the
//! context and the cut Pi would compute, printed. Errors are fine; a panic,
//! an abort or a stack overflow is a finding.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sessionlog_context::{context_doc, cut_doc, CutOptions, Leaf, PiRules, Settings};
use sessionlog_event_log::{load_from, Mode, Reader};

fuzz_target!(|data: &[u8]| {
    let _ = load_from(Reader::new(data, Path::new("fuzz.jsonl"), Mode::Strict));
    let Ok(loaded) = load_from(Reader::new(data, Path::new("fuzz.jsonl"), Mode::Lenient)) else { return };
    let t = &loaded.transcript;
    for rules in [PiRules::V0_58, PiRules::V1_6] {
        if let Ok(doc) = context_doc(t, Leaf::Default, true, rules) {
            let _ = doc.write_json(&mut std::io::sink());
        }
        let options = CutOptions { settings: Settings::default(), context_window: Some(1000), with_text: true, rules };
        let _ = cut_doc(t, Leaf::Default, &options, &sessionlog_tokens::PiEstimator);
    }
});
