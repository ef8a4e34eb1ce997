//! tep: a userspace tunnel endpoint for UDP encapsulations.

mod bench;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "tep",
    version,
    about = "Userspace tunnel endpoint for UDP encapsulations"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure tep on this machine.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// GB/s of each checksum kernel against a read-only pass over the same bytes.
    Checksum {
        /// One JSON object per row instead of a table.
        #[arg(long)]
        json: bool,
        /// Samples per method and size (the median is reported).
        #[arg(long, default_value_t = 15)]
        samples: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench {
            what: BenchCommand::Checksum { json, samples },
        } => {
            let opts = bench::checksum::Options {
                samples: samples.max(1),
                ..Default::default()
            };
            let rows = bench::checksum::run(opts);
            if json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r).expect("rows serialize"));
                }
            } else {
                print!("{}", bench::checksum::render(&rows));
            }
            ExitCode::SUCCESS
        }
    }
}
