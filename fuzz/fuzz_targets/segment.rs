//! Any bytes as a MessagePack segment (magic, then length, CRC-32 and an
//! rmp-serde map per record); with the magic put in front half the time,
//! so the record reader is reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sessionlog_event_log::PackReader;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let bytes = if which & 1 == 0 { [&sessionlog_event_log::pack::MAGIC[..], rest].concat() } else { rest.to_vec() };
    if let Ok(reader) = PackReader::new(&bytes[..]) {
        for record in reader.take(10_000) {
            if record.is_err() {
                break;
            }
        }
    }
});
