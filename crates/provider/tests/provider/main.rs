//! The provider crate's integration tests: one binary, a fake model server
//! on loopback per test, no key and no network.

mod cancel;
mod common;
mod decode;
mod errors;
mod fixtures;
mod overflow_oracle;
mod partial_json;
mod replay;
mod stream;
mod summarize;
