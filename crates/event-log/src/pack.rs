//! MessagePack segments: a compact binary form of a transcript for fast replay.
//!
//! Layout (version 1):
//!
//! ```text
//! magic   8 bytes  b"SLOGMP\0\x01"
//! record* u32 LE payload length | u32 LE CRC-32 (IEEE) of payload | payload
//! ```
//!
//! Each payload is one transcript line (header first) as a MessagePack map
//! (rmp-serde's named encoding: object keys are strings, in their original
//! order). A record cut short or failing its checksum is reported with its
//! index and byte offset; nothing after it is guessed at.
//!
//! Unpacking writes each record back as `JSON.stringify` would, so a line
//! Pi wrote comes back byte for byte, and any line comes back as an equal
//! JSON value.

use std::io::{self, Read, Write};

use sessionlog_events::json::JsFormatter;

/// The first bytes of every segment file.
pub const MAGIC: &[u8; 8] = b"SLOGMP\0\x01";

/// Errors from packing or unpacking, with the record they concern.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The input does not start with [`MAGIC`].
    #[error("not a sessionlog MessagePack segment (bad magic)")]
    BadMagic,
    /// A record's header or payload ends early (a torn write).
    #[error("record {index} at byte {offset}: truncated ({reason})")]
    Truncated {
        /// 0-based record index.
        index: u64,
        /// Byte offset of the record header.
        offset: u64,
        /// What was cut.
        reason: &'static str,
    },
    /// A record's payload does not match its checksum.
    #[error(
        "record {index} at byte {offset}: checksum mismatch (stored {stored:08x}, computed {computed:08x})"
    )]
    Checksum {
        /// 0-based record index.
        index: u64,
        /// Byte offset of the record header.
        offset: u64,
        /// The stored CRC.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// A line is not valid JSON, or a payload is not valid MessagePack.
    #[error("record {index}: {reason}")]
    Encoding {
        /// 0-based record index.
        index: u64,
        /// The codec's message.
        reason: String,
    },
}

/// Writes records into a segment.
#[derive(Debug)]
pub struct PackWriter<W: Write> {
    out: W,
    index: u64,
    payload: Vec<u8>,
}

impl<W: Write> PackWriter<W> {
    /// Starts a segment (writes the magic).
    pub fn new(mut out: W) -> Result<Self, PackError> {
        out.write_all(MAGIC)?;
        Ok(PackWriter { out, index: 0, payload: Vec::new() })
    }

    /// Encodes one JSON line as a record.
    pub fn push_json(&mut self, line: &str) -> Result<(), PackError> {
        self.payload.clear();
        let mut de = serde_json::Deserializer::from_str(line);
        let mut ser = rmp_serde::Serializer::new(&mut self.payload).with_struct_map();
        let encoded = serde_transcode::transcode(&mut de, &mut ser)
            .map_err(|e| e.to_string())
            .and_then(|()| de.end().map_err(|e| e.to_string()));
        encoded.map_err(|reason| PackError::Encoding { index: self.index, reason })?;
        let len = u32::try_from(self.payload.len())
            .map_err(|_| PackError::Encoding { index: self.index, reason: "record over 4 GiB".to_owned() })?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&crc32fast::hash(&self.payload).to_le_bytes())?;
        self.out.write_all(&self.payload)?;
        self.index += 1;
        Ok(())
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> Result<W, PackError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Reads records from a segment, yielding each as a JSON line.
#[derive(Debug)]
pub struct PackReader<R: Read> {
    input: R,
    index: u64,
    offset: u64,
    payload: Vec<u8>,
    done: bool,
}

impl<R: Read> PackReader<R> {
    /// Checks the magic and prepares to read records.
    pub fn new(mut input: R) -> Result<Self, PackError> {
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(|_| PackError::BadMagic)?;
        if &magic != MAGIC {
            return Err(PackError::BadMagic);
        }
        Ok(PackReader { input, index: 0, offset: MAGIC.len() as u64, payload: Vec::new(), done: false })
    }

    fn read_record(&mut self, line: &mut Vec<u8>) -> Result<bool, PackError> {
        let mut head = [0u8; 8];
        let got = read_full(&mut self.input, &mut head)?;
        if got == 0 {
            return Ok(false);
        }
        let (index, offset) = (self.index, self.offset);
        if got < head.len() {
            return Err(PackError::Truncated { index, offset, reason: "record header" });
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let stored = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        self.payload.clear();
        let read = (&mut self.input).take(len as u64).read_to_end(&mut self.payload)?;
        if read < len {
            return Err(PackError::Truncated { index, offset, reason: "payload" });
        }
        let computed = crc32fast::hash(&self.payload);
        if computed != stored {
            return Err(PackError::Checksum { index, offset, stored, computed });
        }
        let mut de = rmp_serde::Deserializer::from_read_ref(&self.payload);
        let mut ser = serde_json::Serializer::with_formatter(&mut *line, JsFormatter);
        serde_transcode::transcode(&mut de, &mut ser)
            .map_err(|e| PackError::Encoding { index, reason: e.to_string() })?;
        self.index += 1;
        self.offset += (head.len() + len) as u64;
        Ok(true)
    }
}

fn read_full<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> Iterator for PackReader<R> {
    type Item = Result<String, PackError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut line = Vec::new();
        match self.read_record(&mut line) {
            Ok(true) => Some(Ok(String::from_utf8(line).unwrap_or_else(|e| {
                // serde_json only writes UTF-8; keep the bytes visible if not.
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }))),
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(lines: &[&str]) -> Vec<u8> {
        let mut w = PackWriter::new(Vec::new()).unwrap();
        for l in lines {
            w.push_json(l).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trips_js_written_lines_byte_for_byte() {
        let lines = [
            r#"{"type":"session","version":3,"id":"x"}"#,
            r#"{"b":1,"a":[0.1,-2,1e+21,1e-7,"\u0001é\n",null,true,{}],"n":12345678901234567000}"#,
        ];
        let packed = pack(&lines);
        let back: Vec<String> = PackReader::new(packed.as_slice()).unwrap().map(Result::unwrap).collect();
        assert_eq!(back, lines);
    }

    #[test]
    fn torn_and_corrupt_records_are_reported_with_their_offset() {
        let packed = pack(&[r#"{"a":1}"#, r#"{"b":2}"#]);
        // magic (8) + record 0: header (8) + fixmap{"a":1} (4 bytes) = 20.
        assert_eq!(&packed[16..20], &[0x81, 0xa1, b'a', 0x01]);
        let cut = &packed[..packed.len() - 2];
        let results: Vec<_> = PackReader::new(cut).unwrap().collect();
        assert!(results[0].is_ok());
        let err = results[1].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("record 1 at byte 20: truncated (payload)"), "{err}");
        let mut flipped = packed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x01;
        let err = PackReader::new(flipped.as_slice()).unwrap().nth(1).unwrap().unwrap_err();
        assert!(matches!(err, PackError::Checksum { index: 1, offset: 20, .. }), "{err}");
        assert!(matches!(PackReader::new(&b"garbage!"[..]), Err(PackError::BadMagic)));
    }

    #[test]
    fn invalid_json_is_refused_with_its_record_index() {
        let mut w = PackWriter::new(Vec::new()).unwrap();
        w.push_json("{}").unwrap();
        let err = w.push_json("{} {}").unwrap_err();
        assert!(err.to_string().starts_with("record 1: "), "{err}");
    }
}
