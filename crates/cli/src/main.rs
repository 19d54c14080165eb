//! `sessionlog`: the command line over sessionlog's libraries.
//!
//! Each command maps its arguments onto library calls and prints; every read
//! and write of a file is a library call (mostly `sessionlog-store`). Exit status 0 on success, 1 on bad input (stderr
//! names the file, line and reason), 2 on usage errors.
//!
//! A command lives in its own file (`<command>.rs`: its `Args` and a `run`);
//! adding one is a `mod` line, a `Command` variant and a `dispatch` arm here.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod append;
mod calibrate;
mod cleanup;
mod common;
mod compact;
mod context;
mod cut;
mod entries;
mod export;
mod gen;
mod import;
mod inspect;
mod key;
mod memory;
mod pack;
mod patch;
mod replay;
mod run;
mod sessions;
mod sweep;
mod turn;
mod usage;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Event-sourced session logs for AI agents, compatible with Pi and OpenClaw.
#[derive(Debug, Parser)]
#[command(name = "sessionlog", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Inspect(inspect::Args),
    Entries(entries::Args),
    Context(context::Args),
    Cut(cut::Args),
    Replay(replay::Args),
    Sweep(sweep::SweepArgs),
    Calibrate(calibrate::Args),
    Import(import::Args),
    Export(export::Args),
    Sessions(sessions::Args),
    Cleanup(cleanup::Args),
    Turn(turn::Args),
    Patch(patch::Args),
    Usage(usage::Args),
    /// Session keys: parse one, or route an inbound message to one.
    #[command(subcommand)]
    Key(key::Command),
    Pack(pack::PackArgs),
    Unpack(pack::UnpackArgs),
    Gen(gen::Args),
    Compact(compact::Args),
    Append(append::Args),
    /// Memory: index, search and read a workspace's memory files and transcripts.
    #[command(subcommand)]
    Memory(memory::Command),
    Run(run::Args),
}

/// Runs one command, writing its output to `out`.
fn dispatch(command: Command, out: &mut dyn Write) -> Result<()> {
    match command {
        Command::Inspect(a) => inspect::run(&a, out),
        Command::Entries(a) => entries::run(&a, out),
        Command::Context(a) => context::run(&a, out),
        Command::Cut(a) => cut::run(&a, out),
        Command::Replay(a) => replay::run(&a, out),
        Command::Sweep(a) => sweep::run(&a, out),
        Command::Calibrate(a) => calibrate::run(&a, out),
        Command::Import(a) => import::run(&a, out),
        Command::Export(a) => export::run(&a, out),
        Command::Sessions(a) => sessions::run(&a, out),
        Command::Cleanup(a) => cleanup::run(&a, out),
        Command::Turn(a) => turn::run(&a, out),
        Command::Patch(a) => patch::run(&a, out),
        Command::Usage(a) => usage::run(&a, out),
        Command::Key(c) => key::run(c, out),
        Command::Pack(a) => pack::pack(&a),
        Command::Unpack(a) => pack::unpack(&a, out),
        Command::Gen(a) => gen::run(&a, out),
        Command::Compact(a) => compact::run(&a, out),
        Command::Append(a) => append::run(&a),
        Command::Memory(c) => memory::run(c, out),
        Command::Run(a) => run::run(&a, out),
    }
}

/// The error and its causes, each cause said once: a cause whose text the
/// message already holds (an error that prints its source) is not repeated.
fn message(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SESSIONLOG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = dispatch(cli.command, &mut out).and_then(|()| out.flush().map_err(Into::into));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed pipe (e.g. `| head`) is not a failure.
            if err.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sessionlog: {}", message(&err));
            ExitCode::from(1)
        }
    }
}
