//! End-to-end tests of the `sessionlog` binary over real and generated
//! transcripts: one test binary, a fresh temp dir per test.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod agent_run;
mod calibrate;
mod cleanup_oracle;
mod compact;
mod concurrency;
mod context_oracle;
mod crash;
mod entries_oracle;
mod exit_codes;
mod fixtures;
mod hostile;
mod hostile_table;
mod import;
mod ledger;
mod memory;
mod project_fixtures;
mod replay;
mod snapshots;
mod sqlite;
mod store;
mod summarizer;
mod support;
mod sweep;
mod torn_tail;
