//! tep: a userspace tunnel endpoint for UDP encapsulations.

mod bench;
mod capture;
mod decode;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    /// Dissect every packet of a pcap/pcapng file, tunnels inside tunnels included.
    Decode {
        /// The capture file.
        file: PathBuf,
        /// One JSON object per packet (schema in the README) instead of text.
        #[arg(long)]
        json: bool,
        /// Treat UDP PORT as tunnel KIND (vxlan, geneve, gtpu, gre, gue,
        /// fou-ipip, fou-sit, fou-gre, or none). Repeatable. FOU has no
        /// header, so it is never guessed: e.g. --port 5555=fou-ipip.
        #[arg(long = "port", value_name = "PORT=KIND")]
        ports: Vec<String>,
    },
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
        Command::Decode { file, json, ports } => decode_command(&file, json, &ports),
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

/// Exit codes of `tep decode`: 0 decoded, 1 bad usage, 2 not a capture.
fn decode_command(file: &std::path::Path, json: bool, ports: &[String]) -> ExitCode {
    let mut map = decode::PortMap::default();
    for spec in ports {
        if let Err(e) = map.apply(spec) {
            eprintln!("tep decode: {e}");
            return ExitCode::from(1);
        }
    }
    let format = if json {
        decode::Format::Json
    } else {
        decode::Format::Text
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match decode::run(file, &map, format, &mut out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(decode::DecodeError::Capture(e)) => {
            eprintln!("tep decode: {}: {e}", file.display());
            ExitCode::from(2)
        }
        // A closed pipe (`tep decode f | head`) is not a failure.
        Err(decode::DecodeError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(decode::DecodeError::Output(e)) => {
            eprintln!("tep decode: writing output: {e}");
            ExitCode::from(1)
        }
    }
}
