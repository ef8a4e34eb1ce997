//! tep-bench: tep measured on this machine, the experiments of the seed
//! documents among them. Every figure is a median of interleaved samples,
//! and every table carries ratios measured side by side in the same run,
//! because absolute times on a shared machine mean little.
//!
//! A binary of its own, so that `tep` links neither the lab nor its
//! charts; it runs the `tep` daemon beside it (or `--tep PATH`) in the
//! network namespaces it builds. `tep bench n4`, the PFCP load an operator
//! points at a live UPF, stays in `tep`.

mod checksum;
mod evpn;
mod flood;
mod fou_gue;
mod gtpu_checksum_gateway;
mod hostpair;
mod overlay_cost;
mod overlay_scale;
mod pingpong;
mod pipeline;
mod plot;
mod probe;
mod report;
mod seat;
mod seeds;
mod sessions;
mod timing;
mod vxlan_rco;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "tep-bench",
    version,
    about = "Measure tep on this machine: checksum kernels, the pipeline, gateway load, the seeds' experiments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// GB/s of each checksum kernel against a read-only pass over the same
    /// bytes, and of a copy then a sum against the fused copy and sum.
    Checksum {
        /// One JSON object per row instead of a table.
        #[arg(long)]
        json: bool,
        /// Samples per method and size (the median is reported).
        #[arg(long, default_value_t = 15)]
        samples: usize,
    },
    /// ns per packet of the encap and decap paths for every tunnel kind,
    /// outer family, checksum mode and size, against a read-only pass
    /// over the same bytes; per-node clocks; the checksum targets.
    ///
    /// Each call is one vector of 256 packets; the sink frees the buffers
    /// inside the timed region, refilling the vector is outside it. Sizes
    /// are inner IP packet lengths; 64k is a TSO super-packet segmented
    /// before encap (and coalesced by GRO on decap). The default run takes
    /// about half a minute.
    Pipeline {
        /// All rows, tables and checks as one JSON object.
        #[arg(long)]
        json: bool,
        /// Samples per row (the median is reported). Default 11 (3 with --quick).
        #[arg(long)]
        samples: Option<usize>,
        /// A CI-sized run: modes zero and full, 1492 bytes, one call per sample.
        #[arg(long)]
        quick: bool,
        /// Tunnel kinds (comma-separated). Default: all.
        #[arg(long, value_delimiter = ',', value_name = "KIND,...")]
        kinds: Vec<String>,
        /// Inner sizes: IP lengths and/or 64k (TSO). Default: 64,576,1492,64k.
        #[arg(long, value_delimiter = ',', value_name = "SIZE,...")]
        sizes: Vec<String>,
        /// Outer families: ipv4, ipv6. Default: both.
        #[arg(long, value_delimiter = ',', value_name = "FAMILY,...")]
        families: Vec<String>,
        /// Checksum modes: zero, full, lco, offload, remote. Default: all
        /// (remote for vxlan and gue only).
        #[arg(long, value_delimiter = ',', value_name = "MODE,...")]
        modes: Vec<String>,
        /// Instead of the matrix: a UPF's GTP-U paths with this many PDU
        /// sessions installed (e.g. 1,1000,1000000), each packet to or from
        /// a random session; ns per packet beside the first count's, and
        /// bytes per session. Uses --families, the first of --modes
        /// (default full) and of --sizes (default 1492).
        #[arg(long, value_delimiter = ',', value_name = "N,...")]
        sessions: Vec<u32>,
        /// With --sessions: packets per session in a row within a vector
        /// (1: every packet to another random session, the caches' worst
        /// case; 8: bursts, as a TCP window's segments come).
        #[arg(long, default_value_t = 1)]
        burst: usize,
        /// With --sessions: SDF filters per session each way (e.g.
        /// 0,1,4,16): that many PDRs with one filter each, the one the
        /// packets match last; 0: one PDR, no filter. Each count's rows
        /// beside its 0 row.
        #[arg(long, value_delimiter = ',', value_name = "N,...")]
        filters: Vec<usize>,
        /// With --sessions: each row again with every session metered
        /// both ways (a session AMBR it never reaches), beside it.
        #[arg(long)]
        mbr: bool,
        /// Instead of the matrix: networks at scale (--macs over --vteps and
        /// --networks, bursts of 1 and 8) beside one point-to-point VXLAN
        /// tunnel, and flooding to 1, 10 and 100 peers; each of --sizes
        /// (default 64).
        #[arg(long)]
        overlay: bool,
        /// With --overlay: MACs learned.
        #[arg(long, default_value_t = 1 << 20)]
        macs: u32,
        /// With --overlay: remote VTEPs they are behind.
        #[arg(long, default_value_t = 10_000)]
        vteps: u32,
        /// With --overlay: networks they are in.
        #[arg(long, default_value_t = 4096)]
        networks: u32,
    },
    /// A packet generator: replays the Ethernet frames of a pcap file out
    /// of an interface through AF_XDP, over and over, for a time; prints
    /// how many frames the kernel took. For benchmarks of gateway mode
    /// (examples/bench-gateway.sh), in namespaces you own.
    Flood {
        /// The interface to send from.
        #[arg(long)]
        interface: String,
        /// Its queue.
        #[arg(long, default_value_t = 0)]
        queue: u32,
        /// The frames (up to 2048 are used).
        #[arg(long)]
        pcap: std::path::PathBuf,
        /// How long.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Reproduces the experiments of the seed documents beside their
    /// published figures, in network namespaces this command builds
    /// (root). 000: 1492-byte packets at steady rates into a tep gateway,
    /// GTP-U/IPv6 out, per checksum mode, loss and latency (with
    /// --tx/--rx/--dst between interfaces you name, through a gateway you
    /// run). 001/004: GRE, IPIP and SIT in FOU and GUE through tep, UDP
    /// checksum enabled and disabled, TCP throughput, request/response and
    /// CPU per side. 002: VXLAN's cost per layer and end to end against no
    /// tunnel. 003: VXLAN with checksum, RCO and none, tep beside the
    /// kernel.
    Seeds(seeds::Options),
    /// BGP EVPN through the tep daemon in namespaces this command builds
    /// (root): from a kernel FDB notification (what zebra writes) to tep's
    /// workers forwarding by it, median to max over --changes, half new
    /// MACs and half moves; and --macs behind --vteps in the kernel before
    /// tep starts, the time until it forwards by all of them.
    Evpn(evpn::Options),
}

fn main() -> ExitCode {
    // As tep does: the session tables on huge pages where the kernel
    // gives them.
    tep_dataplane::memory::set_huge_page_advice(|addr, len| {
        let _ = tep_sys::memory::advise_huge_pages(addr, len);
    });
    match Cli::parse().command {
        Command::Checksum { json, samples } => {
            let opts = checksum::Options {
                samples: samples.max(1),
                ..Default::default()
            };
            let rows = checksum::run(opts);
            if json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r).expect("rows serialize"));
                }
            } else {
                print!("{}", checksum::render(&rows));
            }
            ExitCode::SUCCESS
        }
        Command::Pipeline {
            json,
            samples,
            sizes,
            families,
            modes,
            sessions,
            burst,
            filters,
            mbr,
            ..
        } if !sessions.is_empty() => bench_sessions_command(
            json,
            samples,
            (&sessions, burst, &filters, mbr),
            &sizes,
            &families,
            &modes,
        ),
        Command::Pipeline {
            json,
            samples,
            sizes,
            overlay: true,
            macs,
            vteps,
            networks,
            ..
        } => bench_overlay_command(json, samples, &sizes, (macs, vteps, networks)),
        Command::Pipeline {
            json,
            samples,
            quick,
            kinds,
            sizes,
            families,
            modes,
            ..
        } => bench_pipeline_command(json, samples, quick, &kinds, &sizes, &families, &modes),
        Command::Flood {
            interface,
            queue,
            pcap,
            seconds,
            json,
        } => flood_command(&interface, queue, &pcap, seconds, json),
        Command::Seeds(o) => seeds::command(&o),
        Command::Evpn(o) => evpn::command(&o),
    }
}

fn flood_command(
    interface: &str,
    queue: u32,
    pcap: &std::path::Path,
    seconds: f64,
    json: bool,
) -> ExitCode {
    let result = tep_sys::netlink::link_by_name(interface)
        .map_err(|e| format!("--interface {interface}: {e}"))
        .and_then(|link| {
            let frames = flood::frames_of(pcap)?;
            flood::run(link.index, queue, &frames, seconds)
                .map_err(|e| format!("AF_XDP on {interface} queue {queue}: {e}"))
        });
    match result {
        Ok(f) if json => {
            println!("{}", serde_json::to_string(&f).expect("serializes"));
            ExitCode::SUCCESS
        }
        Ok(f) => {
            println!(
                "{} frames in {:.2} s: {:.3} Mpps",
                f.frames,
                f.seconds,
                f.pps / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tep-bench flood: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses a comma list with `parse`, keeping `default` when it is empty.
fn list<T>(
    items: &[String],
    default: Vec<T>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if items.is_empty() {
        return Ok(default);
    }
    items.iter().map(|s| parse(s.trim())).collect()
}

fn bench_overlay_command(
    json: bool,
    samples: Option<usize>,
    sizes: &[String],
    (macs, vteps, networks): (u32, u32, u32),
) -> ExitCode {
    let ip_length = |s: &pipeline::Size| match s {
        pipeline::Size::Ip(n) => Some(*n),
        pipeline::Size::Tso => None,
    };
    let sizes: Vec<usize> = match list(sizes, vec![pipeline::Size::Ip(64)], pipeline::Size::parse) {
        Ok(s) => match s.iter().map(ip_length).collect() {
            Some(s) => s,
            None => {
                eprintln!("tep-bench pipeline --overlay: --sizes takes IP lengths");
                return ExitCode::from(1);
            }
        },
        Err(e) => {
            eprintln!("tep-bench pipeline: {e}");
            return ExitCode::from(1);
        }
    };
    if macs == 0 || vteps == 0 || networks == 0 || networks > 65_535 {
        eprintln!(
            "tep-bench pipeline --overlay: --macs and --vteps at least 1, --networks 1..=65535"
        );
        return ExitCode::from(1);
    }
    let samples = samples.unwrap_or(101).max(1);
    let run = || -> Result<_, String> {
        let (mut scale, mut flood) = (Vec::new(), Vec::new());
        for &size in &sizes {
            for burst in [1, 8] {
                scale.extend(overlay_scale::scale(
                    macs, vteps, networks, burst, size, samples,
                )?);
            }
            flood.extend(overlay_scale::flooding(&[1, 10, 100], size, samples)?);
        }
        Ok((scale, flood))
    };
    match run() {
        Ok((scale, flood)) if json => {
            let all = serde_json::json!({ "scale": scale, "flooding": flood });
            println!("{all}");
            ExitCode::SUCCESS
        }
        Ok((scale, flood)) => {
            print!("{}", overlay_scale::render(&scale, &flood));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tep-bench pipeline --overlay: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench_sessions_command(
    json: bool,
    samples: Option<usize>,
    (counts, burst, filters, mbr): (&[u32], usize, &[usize], bool),
    sizes: &[String],
    families: &[String],
    modes: &[String],
) -> ExitCode {
    use pipeline as bp;
    let parsed = (|| {
        let sizes = list(sizes, vec![bp::Size::Ip(1492)], bp::Size::parse)?;
        let size = match sizes[0] {
            bp::Size::Ip(n) => n,
            bp::Size::Tso => return Err("--sizes: the session benchmark takes an IP length".into()),
        };
        let families = list(families, bp::Family::ALL.to_vec(), bp::Family::parse)?;
        let mode = list(
            modes,
            vec![tep_dataplane::config::ChecksumMode::Full],
            bp::parse_mode,
        )?[0];
        if mode == tep_dataplane::config::ChecksumMode::Remote {
            return Err("--modes: GTP-U has no remote checksum offload".to_string());
        }
        if counts.contains(&0) {
            return Err("--sessions: counts start at 1".to_string());
        }
        if filters
            .iter()
            .any(|&f| f > tep_dataplane::session::rules::MAX_RULES)
        {
            return Err(format!(
                "--filters: at most {} a session",
                tep_dataplane::session::rules::MAX_RULES
            ));
        }
        Ok::<_, String>((size, families, mode))
    })();
    let (size, families, mode) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("tep-bench pipeline: {e}");
            return ExitCode::from(1);
        }
    };
    let v6: Vec<bool> = families.iter().map(|f| *f == bp::Family::Ipv6).collect();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let filters = if filters.is_empty() {
        &[0][..]
    } else {
        filters
    };
    let rows = sessions::run(
        (counts, filters, mbr),
        &v6,
        mode,
        size,
        burst.clamp(1, 256),
        samples.unwrap_or(101).max(1),
        |what| {
            if tty {
                eprint!("\r\x1b[K{what}");
            }
        },
    );
    if tty {
        eprint!("\r\x1b[K");
    }
    match rows {
        Ok(rows) if json => {
            println!("{}", serde_json::to_string(&rows).expect("rows serialize"));
            ExitCode::SUCCESS
        }
        Ok(rows) => {
            print!("{}", sessions::render(&rows));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tep-bench pipeline --sessions: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench_pipeline_command(
    json: bool,
    samples: Option<usize>,
    quick: bool,
    kinds: &[String],
    sizes: &[String],
    families: &[String],
    modes: &[String],
) -> ExitCode {
    use pipeline as bp;
    let base = if quick {
        bp::Options::quick()
    } else {
        bp::Options::default()
    };
    let parsed = (|| {
        Ok::<_, String>(bp::Options {
            samples: samples.unwrap_or(base.samples).max(1),
            kinds: list(kinds, base.kinds.clone(), |s| s.parse())
                .map_err(|e| format!("--kinds: {e}"))?,
            sizes: list(sizes, base.sizes.clone(), bp::Size::parse)
                .map_err(|e| format!("--sizes: {e}"))?,
            families: list(families, base.families.clone(), bp::Family::parse)
                .map_err(|e| format!("--families: {e}"))?,
            modes: list(modes, base.modes.clone(), bp::parse_mode)
                .map_err(|e| format!("--modes: {e}"))?,
            ..base.clone()
        })
    })();
    let opts = match parsed {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tep-bench pipeline: {e}");
            return ExitCode::from(1);
        }
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let res = bp::run(&opts, |row| {
        if tty {
            eprint!("\r\x1b[Kmeasuring {row}");
        }
    });
    if tty {
        eprint!("\r\x1b[K");
    }
    if json {
        println!(
            "{}",
            serde_json::to_string(&res).expect("results serialize")
        );
    } else {
        print!("{}", bp::render(&res));
    }
    ExitCode::SUCCESS
}
