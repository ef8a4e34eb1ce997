//! tep: a userspace tunnel endpoint for UDP encapsulations.

/// `tep bench n4`, the one benchmark an operator runs against a live UPF;
/// the benchmark lab (pipeline, seeds, flood, checksum) is `tep-bench`.
mod bench {
    pub mod n4;
}
mod daemon;
mod gateway;
mod host;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tep_capture::{decode, replay as pcap};

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
        /// One JSON object per packet (schema in docs/decode.md) instead of text.
        #[arg(long)]
        json: bool,
        /// Treat UDP PORT as tunnel KIND (vxlan, geneve, gtpu, gre, gue,
        /// fou-ipip, fou-sit, fou-gre, gue-gre, or none). Repeatable. FOU has no
        /// header, so it is never guessed: e.g. --port 5555=fou-ipip.
        #[arg(long = "port", value_name = "PORT=KIND")]
        ports: Vec<String>,
    },
    /// Run the dataplane pipeline over a capture file.
    Pcap {
        #[command(subcommand)]
        what: PcapCommand,
    },
    /// Run the tunnel endpoint: TUN/TAP devices and UDP sockets for the
    /// config's tunnels, until SIGTERM. SIGHUP (or `tep reload`) re-reads
    /// the config; a bad one is refused and the running one stays.
    Run {
        /// The config (tep.toml) with its [host] section.
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Log debug details too.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Ask the running daemon for its tunnels, counters, per-node runtime,
    /// PFCP state, networks or EVPN state.
    Show {
        /// tunnels (traffic, checksum mode and offloads in effect),
        /// counters (pipeline edges, I/O events, drops by node and reason),
        /// runtime (the per-node cost table), pfcp (a UPF's N4 side:
        /// associations, sessions, PFCP counters), or networks (each
        /// [[network]]'s settings, flood list, table sizes and counters),
        /// or evpn (each EVPN network's kernel devices, the VTEPs taken
        /// from BGP, local MACs written for zebra, and what was refused).
        #[arg(value_parser = ["tunnels", "counters", "runtime", "pfcp", "networks", "evpn"])]
        what: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Make the running daemon re-read its config (as SIGHUP does); prints
    /// the error naming the field if the new config is refused.
    Reload {
        #[command(flatten)]
        target: Target,
    },
    /// Capture the next COUNT packets at the daemon's TUN/TAP and UDP
    /// edges into a pcapng file (interfaces tun, tap, udp; direction flags).
    Trace {
        /// Where to write the capture.
        #[arg(long, value_name = "FILE")]
        pcap: PathBuf,
        /// Packets to capture.
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// Give up waiting after this many seconds (writes what it has).
        #[arg(long, default_value_t = 10)]
        timeout: u64,
        #[command(flatten)]
        target: Target,
    },
    /// Show or change a network's MACs: which remote VTEP each is behind
    /// (as `bridge fdb`).
    ///
    /// `add` refuses a MAC already there, `replace` overwrites it; entries
    /// added here are static (never aged, never moved by learning).
    #[command(after_help = overlay_help("fdb"))]
    Fdb(OverlayVerb),
    /// Show or change a network's flood list (remote VTEPs).
    ///
    /// The remote VTEPs that get a copy of broadcast, multicast and
    /// unknown unicast frames (`bridge fdb append 00:00:00:00:00:00 dst
    /// ADDR`).
    #[command(after_help = overlay_help("peer"))]
    Peer(OverlayVerb),
    /// Show or change a network's neighbours for ARP/ND suppression (as
    /// `ip neigh`).
    ///
    /// The MAC (lladdr) of an IP address, which tep answers ARP requests
    /// and Neighbor Solicitations with.
    #[command(after_help = overlay_help("neigh"))]
    Neigh(OverlayVerb),
    /// Show or change an L3 network's routes (as `ip route`).
    ///
    /// Which remote VTEP (via) an inner prefix is behind.
    #[command(after_help = overlay_help("route"))]
    Route(OverlayVerb),
    /// Load a running UPF over PFCP (the rest of the benchmarks is
    /// the `tep-bench` binary).
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
}

/// Exit codes of `tep pcap`: 0 done (packets may have dropped: see the
/// report), 1 an output could not be written, 2 bad config or unreadable
/// capture.
#[derive(Debug, Subcommand)]
enum PcapCommand {
    /// Encapsulate the inner packets of IN with the config's tunnels; write
    /// the outer packets to OUT.
    ///
    /// IN holds inner packets: Ethernet frames (given whole to the pipeline
    /// when the config has a vxlan or geneve tunnel, else stripped to their
    /// IP packet), raw IP, or Linux cooked captures. OUT is raw IP
    /// (LINKTYPE_RAW): one outer IPv4/IPv6 packet per inner packet, with the
    /// input's time stamp. Checksums left partial (checksum = "offload")
    /// are finished as the offloading device would. Prints the pipeline's
    /// runtime report, counters and drops.
    Encap {
        #[command(flatten)]
        common: PcapArgs,
    },
    /// Decapsulate the outer packets of IN for the config's tunnels; write
    /// the inner packets to OUT.
    ///
    /// IN holds outer packets (Ethernet with up to two VLAN tags, raw IP,
    /// Linux cooked). OUT is raw IP (LINKTYPE_RAW) when the config has only
    /// L3 tunnels; when it has a vxlan or geneve tunnel OUT is Ethernet
    /// (LINKTYPE_ETHERNET) and inner IP packets of L3 tunnels get a
    /// synthetic Ethernet header (02:00:00:00:00:01 -> 02:00:00:00:00:02).
    /// Each packet keeps its input time stamp, which is also the
    /// pipeline's clock (it paces GTP-U Error Indications).
    Decap {
        #[command(flatten)]
        common: PcapArgs,
        /// Write the pipeline's replies (GTP-U Echo Responses, Error
        /// Indications: raw IP) to FILE; without it they are counted and
        /// dropped.
        #[arg(long, value_name = "FILE")]
        replies: Option<PathBuf>,
        /// Take every outer UDP checksum as verified, as a veth peer or a
        /// NIC with receive checksum offload does: for captures taken on the
        /// sending host, where checksums are still partial.
        #[arg(long)]
        trust_checksums: bool,
    },
}

/// Which daemon to talk to.
#[derive(Debug, Args)]
struct Target {
    /// The control socket (default: the config's host.control, else
    /// /run/tep/tep.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Read host.control from this config.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// A verb on a network's table, sent to the running daemon.
#[derive(Debug, Args)]
struct OverlayVerb {
    /// show, add, replace or del, then the words of its form (below);
    /// "dev NET" names the network.
    #[arg(required = true, value_name = "VERB [WORDS]")]
    words: Vec<String>,
    /// show: one JSON array.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

fn overlay_help(table: &str) -> String {
    let forms: Vec<String> = daemon::overlay::forms(table)
        .iter()
        .map(|f| format!("  tep {}", f.replace("[json]", "[--json]")))
        .collect();
    format!(
        "Forms:\n{}\n\nChanges take effect at once and last until the daemon stops; \
         a reload keeps them unless the new config says otherwise.",
        forms.join("\n")
    )
}

#[derive(Debug, Args)]
struct PcapArgs {
    /// The tunnel configuration (tep.toml).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The input capture (pcap or pcapng).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The output capture (pcap).
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// Coalesce decapsulated TCP/UDP flows (GRO).
    #[arg(long)]
    gro: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// A PFCP load generator against a running UPF (tep's or another):
    /// Association Setup, then rounds of N Session Establishments and N
    /// Deletions with a window of requests outstanding, every message
    /// built before the clock starts; establishments and deletions per
    /// second per round and their medians (examples/bench-n4.sh runs it
    /// against tep in namespaces).
    N4(bench::n4::Options),
}

/// The dataplane's large tables on huge pages ([`tep_dataplane::memory`]):
/// a kernel that refuses (THP `never`) leaves them on small pages, slower
/// at a million sessions and otherwise the same.
fn advise_huge_pages(addr: usize, len: usize) {
    if let Err(e) = tep_sys::memory::advise_huge_pages(addr, len) {
        tracing::debug!(bytes = len, "a table stays on small pages: {e}");
    }
}

fn main() -> ExitCode {
    tep_dataplane::memory::set_huge_page_advice(advise_huge_pages);
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { file, json, ports } => decode_command(&file, json, &ports),
        Command::Pcap { what } => pcap_command(what),
        Command::Run { config, verbose } => run_command(&config, verbose),
        Command::Show { what, json, target } => {
            let line = format!("show {what}{}", if json { " json" } else { "" });
            control_command(&target, &line, 10, None)
        }
        Command::Reload { target } => control_command(&target, "reload", 35, None),
        Command::Fdb(v) => overlay_command("fdb", &v),
        Command::Peer(v) => overlay_command("peer", &v),
        Command::Neigh(v) => overlay_command("neigh", &v),
        Command::Route(v) => overlay_command("route", &v),
        Command::Trace {
            pcap,
            count,
            timeout,
            target,
        } => control_command(
            &target,
            &format!("trace {count} {}", timeout.saturating_mul(1000)),
            timeout + 5,
            Some(&pcap),
        ),
        Command::Bench {
            what: BenchCommand::N4(o),
        } => match bench::n4::run(&o) {
            Ok(rounds) => {
                print!("{}", bench::n4::render(&o, &rounds));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tep bench n4: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run_command(config: &std::path::Path, verbose: bool) -> ExitCode {
    let level = if verbose {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    exit_on_panic();
    let run = match tep_config::Config::load(config).map(|c| c.run_mode()) {
        Ok(Ok(tep_config::RunMode::Gateway)) => gateway::run,
        // Host mode, or an error host mode reports as it loads the file.
        _ => host::run,
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once: the log line (stderr, and the journal under systemd).
            tracing::error!("tep run: {e}");
            ExitCode::from(2)
        }
    }
}

/// A panic on any thread of `tep run` ends the process (status 101, as a
/// panic of the main thread would): a daemon that lost its N4 thread or
/// a worker would otherwise go on half alive. Under systemd the service
/// then fails and `Restart=on-failure` starts it afresh; the XDP programs
/// and the TUN/TAP devices go with the process.
fn exit_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let thread = std::thread::current();
        tracing::error!(thread = thread.name().unwrap_or("?"), "{info}; tep exits");
        std::process::exit(101);
    }));
}

/// `tep TABLE VERB WORDS…`: refused here when malformed (exit 2, as for
/// bad usage), else sent to the daemon.
fn overlay_command(table: &str, v: &OverlayVerb) -> ExitCode {
    let line = format!(
        "{table} {}{}",
        v.words.join(" "),
        if v.json { " json" } else { "" }
    );
    let words: Vec<&str> = line.split_whitespace().collect();
    if let Err(e) = daemon::overlay::parse(&words) {
        eprintln!("tep: {e}");
        return ExitCode::from(2);
    }
    control_command(&v.target, &words.join(" "), 10, None)
}

/// Sends `line` to the daemon; prints the answer, or writes it to `out`.
fn control_command(
    target: &Target,
    line: &str,
    timeout_s: u64,
    out: Option<&std::path::Path>,
) -> ExitCode {
    let path = match daemon::control_path(target.socket.clone(), target.config.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tep: {e}");
            return ExitCode::from(2);
        }
    };
    match daemon::control::request(&path, line, std::time::Duration::from_secs(timeout_s)) {
        Ok(body) => match out {
            Some(file) => match std::fs::write(file, &body) {
                Ok(()) => {
                    eprintln!("wrote {} ({} bytes)", file.display(), body.len());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("tep: cannot write {}: {e}", file.display());
                    ExitCode::from(1)
                }
            },
            None => {
                print!("{}", String::from_utf8_lossy(&body));
                ExitCode::SUCCESS
            }
        },
        Err(e) => {
            eprintln!("tep: {e}");
            ExitCode::from(1)
        }
    }
}

fn pcap_command(what: PcapCommand) -> ExitCode {
    let (direction, common, replies, trust_checksums) = match what {
        PcapCommand::Encap { common } => (pcap::Direction::Encap, common, None, false),
        PcapCommand::Decap {
            common,
            replies,
            trust_checksums,
        } => (pcap::Direction::Decap, common, replies, trust_checksums),
    };
    let json = common.json;
    let opts = pcap::Options {
        direction,
        config: common.config,
        input: common.input,
        output: common.output,
        replies,
        gro: common.gro,
        trust_checksums,
    };
    let input = opts.input.clone();
    match pcap::run(opts) {
        Ok(report) => {
            if json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            ExitCode::SUCCESS
        }
        Err(e @ pcap::PcapError::Config(_)) => {
            eprintln!("tep pcap: {e}");
            ExitCode::from(2)
        }
        Err(e @ pcap::PcapError::Capture(_)) => {
            eprintln!("tep pcap: {}: {e}", input.display());
            ExitCode::from(2)
        }
        Err(e @ pcap::PcapError::Output(..)) => {
            eprintln!("tep pcap: {e}");
            ExitCode::from(1)
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
