//! The live agent loop of sessionlog.
//!
//! * [`tools`] — the [`tools::Tool`] trait and Pi's built-ins `read`,
//!   `write`, `edit`, `bash`, rooted at a [`tools::Workspace`]; results
//!   written as Pi's agent loop writes them.
//!
//! This crate may use tokio; the store, context and compaction calls it
//! makes are the synchronous library functions the CLI uses too.

pub mod tools;
