//! `tep-bench seeds`: the experiments of the seed documents, rerun here and
//! shown beside the figures the seeds published. Seed 000 has its own
//! generator and sink ([`super::gtpu_checksum_gateway`]); 001-004 share two hosts and
//! their measurements ([`super::hostpair`]): a case two seeds ask for (the
//! same path, the same measurement) runs once.

use super::hostpair::{self, Case, Hosts, Timing};
use super::report::{targets_text, SeedReport};
// The experiments, by the number of the seed each reproduces (001's
// module does 004 too).
use super::fou_gue as seed001;
use super::gtpu_checksum_gateway::{
    self as seed000, Case as ProbeCase, Plan, Runs, PACKET_LEN, RATES,
};
use super::overlay_cost as seed002;
use super::vxlan_rco as seed003;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tep_sys::{Signal, Signals};

/// What `tep-bench seeds` is asked.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Which seeds: 000 001 002 003 004 (default: all).
    pub seeds: Vec<String>,
    /// A reduced run of every experiment, under two minutes in all.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Seed 000: seconds per case (default 5, --quick 1).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Seed 000: checksum modes of the gateway (default zero,full,offload,lco).
    #[arg(long, value_delimiter = ',', value_name = "MODE,...")]
    pub modes: Vec<String>,
    /// Seed 000: offered rates, packets per second (default 100,275000).
    #[arg(long, value_delimiter = ',', value_name = "PPS,...")]
    pub rates: Vec<f64>,
    /// Seed 000: the sweep per mode (1-2-5 steps from 1,000 pps) goes up to
    /// this rate, or stops where the generator falls short or a mode loses
    /// more than 10 %; 0: no sweep. --quick sweeps 10,000 and 100,000.
    #[arg(long, default_value_t = 1_000_000.0, value_name = "PPS")]
    pub sweep_to: f64,
    /// Write PNG charts into this directory: seed 000's sweep (latency and
    /// loss against the offered rate), bars for 001-004.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<std::path::PathBuf>,
    /// Rounds, cases interleaved in each; figures are medians over them.
    /// Default: 1 for seed 000, 3 for 001-004 (--quick: 1).
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,
    /// Seed 000: send the probes out of this interface (with --dst and
    /// --rx) instead of building namespaces.
    #[arg(long, requires_all = ["rx", "dst"])]
    pub tx: Option<String>,
    /// Seed 000: receive the gateway's GTP-U on this interface.
    #[arg(long, requires = "tx")]
    pub rx: Option<String>,
    /// Seed 000: the inner destination address the probes go to (routed
    /// through the gateway under test).
    #[arg(long, requires = "tx")]
    pub dst: Option<IpAddr>,
    /// Seed 000: where the sink listens for the GTP-U datagrams.
    #[arg(long, default_value = "[::]:2152")]
    pub listen: SocketAddr,
    /// Seed 000: the gateway's workers (one queue each), a run per count:
    /// 1,2,4,8 makes the scaling table. Default: what the CPUs allow
    /// beside the generator and the sink (half of all but the sink's).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub workers: Vec<usize>,
    /// Seed 000: the generator's sender threads, each its own socket and
    /// sequence space, the rate split among them. Default: the CPUs the
    /// workers and the sink leave (at least one).
    #[arg(long, value_name = "N")]
    pub senders: Option<usize>,
    /// Seed 000: measure the generator alone (its senders straight into a
    /// sink that only counts, no gateway) at --rates: plain sendmmsg with
    /// 1 thread, then --gso with 1 and with --senders threads (default 2),
    /// alternating over --repeat rounds, medians at the end.
    #[arg(long)]
    pub generator: bool,
    /// Seed 000: the senders' UDP GSO: `on` (32 probes per message), `off`
    /// (plain sendmmsg, the sink without GRO) or probes per message
    /// (2..=64, as many as fit 64 KiB). --generator measures plain single
    /// thread beside it. A kernel that refuses GSO: plain, reported.
    #[arg(long, default_value = "on", value_parser = parse_gso, value_name = "on|off|N")]
    pub gso: usize,
    /// The tep binary the daemons in the namespaces run (default: the
    /// `tep` beside this tep-bench).
    #[arg(long, value_name = "PATH")]
    pub tep: Option<PathBuf>,
}

/// `--gso`: probes per GSO message (1: off).
fn parse_gso(v: &str) -> Result<usize, String> {
    match v {
        "on" => Ok(seed000::GSO_SEGMENTS),
        "off" => Ok(1),
        n => match n.parse::<usize>() {
            Ok(n) if (1..=64).contains(&n) => Ok(n),
            _ => Err(format!("{v}: on, off or probes per message 1..=64")),
        },
    }
}

/// Every seed, in order.
const SEEDS: [&str; 5] = ["000", "001", "002", "003", "004"];
/// The checksum modes of seed 000's gateway.
const MODES: [&str; 4] = ["zero", "full", "offload", "lco"];

fn usage(msg: String) -> ExitCode {
    eprintln!("tep-bench seeds: {msg}");
    ExitCode::from(2)
}

pub fn command(o: &Options) -> ExitCode {
    let seeds: Vec<&str> = if o.seeds.is_empty() {
        SEEDS.to_vec()
    } else {
        o.seeds.iter().map(String::as_str).collect()
    };
    if let Some(s) = seeds.iter().find(|s| !SEEDS.contains(s)) {
        return usage(format!("no seed {s} (seeds: {})", SEEDS.join(", ")));
    }
    if o.tx.is_some() && seeds != ["000"] {
        return usage("--tx/--rx/--dst measure a gateway you run: seed 000 only".into());
    }
    if o.generator {
        return generator(o);
    }
    let seed000_plan = if seeds.contains(&"000") {
        match plan_000(o) {
            Ok(p) => Some(p),
            Err(e) => return usage(e),
        }
    } else {
        None
    };
    let timing = Timing {
        rounds: o.repeat.unwrap_or(if o.quick { 1 } else { 3 }).max(1),
        stream_seconds: if o.quick { 1.0 } else { 10.0 },
        rr_seconds: if o.quick { 1.0 } else { 5.0 },
    };
    let cases = host_cases(&seeds, o.quick);
    // The gateway under test with --tx is the user's: no namespaces, no tep.
    let tep = if !cases.is_empty() || (seed000_plan.is_some() && o.tx.is_none()) {
        match tep_binary(o) {
            Ok(t) => t,
            Err(e) => return usage(e),
        }
    } else {
        PathBuf::new()
    };
    if !o.json {
        let mut total = timing.estimate(&cases);
        if let Some((_, plan)) = &seed000_plan {
            total += estimate_000(o, plan);
        }
        eprintln!(
            "tep-bench seeds {}: about {:.0} s ({} host case(s) x {} round(s){})",
            seeds.join(" "),
            total,
            cases.len(),
            timing.rounds,
            if seed000_plan.is_some() {
                ", then seed 000"
            } else {
                ""
            }
        );
    }
    if let Err(e) = clean_up_on_signals() {
        eprintln!("tep-bench seeds: {e}");
        return ExitCode::FAILURE;
    }
    let started = Instant::now();
    let mut reports = Vec::new();
    if !cases.is_empty() {
        match host_reports(&seeds, &cases, timing, o, &tep) {
            Ok(r) => reports = r,
            Err(e) => {
                eprintln!("tep-bench seeds: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some((modes, plan)) = &seed000_plan {
        match report_000(o, modes, plan, &tep) {
            Ok(r) => reports.insert(0, r),
            Err(e) => {
                eprintln!("tep-bench seeds: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if o.json {
        let mut all = serde_json::Map::new();
        for r in &reports {
            let mut v = r.json.clone();
            v["targets"] = serde_json::json!(r.targets);
            v["passed_traffic"] = serde_json::json!(r.passed);
            all.insert(r.seed.to_string(), v);
        }
        println!(
            "{}",
            serde_json::json!({
                "seeds": all,
                "quick": o.quick,
                "seconds_total": started.elapsed().as_secs_f64(),
            })
        );
    } else {
        for r in &reports {
            print!("{}", r.text);
            print!("{}", targets_text(&r.targets));
        }
        println!(
            "\n{} seed(s) in {:.0} s",
            reports.len(),
            started.elapsed().as_secs_f64()
        );
    }
    if let Some(dir) = &o.plot {
        for b in reports.iter().flat_map(|r| &r.charts) {
            match super::plot::bars(dir, b) {
                Ok(path) => eprintln!("wrote {}", path.display()),
                Err(e) => {
                    eprintln!("tep-bench seeds: --plot: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    if reports.iter().all(|r| r.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--generator`: seed 000's generator alone: plain single-thread
/// sendmmsg, and `--gso` with one sender thread and with `--senders`
/// (default 2).
fn generator(o: &Options) -> ExitCode {
    let rates = if o.rates.is_empty() {
        vec![200_000.0, 400_000.0, 800_000.0, 1_600_000.0]
    } else {
        o.rates.clone()
    };
    let threads = o.senders.unwrap_or(2).clamp(1, 64);
    let config = |threads, segments| seed000::GenConfig { threads, segments };
    // Plain single-thread sendmmsg first: what the others are held to.
    let mut configs = vec![config(1, 1)];
    for c in [config(1, o.gso), config(threads, o.gso)] {
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    let seconds = o.seconds.unwrap_or(2.0).clamp(0.1, 600.0);
    let rounds = o.repeat.unwrap_or(1).clamp(1, 100);
    if let Err(e) = clean_up_on_signals() {
        eprintln!("tep-bench seeds: {e}");
        return ExitCode::FAILURE;
    }
    match seed000::generator_alone(&configs, &rates, seconds, rounds) {
        Ok(cases) if o.json => {
            println!("{}", serde_json::json!({ "generator": cases }));
            ExitCode::SUCCESS
        }
        Ok(cases) => {
            print!("{}", seed000::generator_table(&cases));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tep-bench seeds --generator: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The cases of seeds 001-004, each (id) once: a case two seeds ask for
/// runs with both measurements.
fn host_cases(seeds: &[&str], quick: bool) -> Vec<Case> {
    let mut all: Vec<Case> = Vec::new();
    for &s in seeds {
        let cases = match s {
            "001" => seed001::cases_001(quick),
            "002" => seed002::cases(quick),
            "003" => seed003::cases(quick),
            "004" => seed001::cases_004(quick),
            _ => Vec::new(),
        };
        for c in cases {
            match all.iter_mut().find(|a| a.id == c.id) {
                Some(a) => {
                    a.stream |= c.stream;
                    a.rr |= c.rr;
                }
                None => all.push(c),
            }
        }
    }
    all
}

fn host_reports(
    seeds: &[&str],
    cases: &[Case],
    timing: Timing,
    o: &Options,
    tep: &Path,
) -> Result<Vec<SeedReport>, String> {
    let hosts = Hosts::new(tep.to_path_buf())?;
    let how = format!(
        "two namespaces on one veth pair, side a on CPU {} and b on CPU {} (RPS steers each \
         veth's receive there); iperf3 1 TCP stream {} s, TCP request/response of 64 bytes {} s; medians \
         of {} round(s), cases interleaved",
        hosts.cpus[0], hosts.cpus[1], timing.stream_seconds, timing.rr_seconds, timing.rounds
    );
    let json = o.json;
    let measured = hostpair::run_cases(&hosts, cases, timing, |p| {
        if !json {
            eprintln!("  {p}");
        }
    });
    drop(hosts);
    let mut out = Vec::new();
    for &s in seeds {
        match s {
            "001" => out.push(seed001::report_001(&measured, o.quick, &how)),
            "002" => {
                let layers = seed002::layers(o.quick);
                out.push(seed002::report(&measured, layers.as_ref(), &how));
            }
            "003" => out.push(seed003::report(&measured, o.quick, &how)),
            "004" => out.push(seed001::report_004(&measured, &how)),
            _ => {}
        }
    }
    Ok(out)
}

/// Seed 000's modes and plan from the options.
fn plan_000(o: &Options) -> Result<(Vec<String>, Plan), String> {
    let modes: Vec<String> = if o.modes.is_empty() {
        MODES.iter().map(|m| m.to_string()).collect()
    } else {
        o.modes.clone()
    };
    if let Some(m) = modes.iter().find(|m| !MODES.contains(&m.as_str())) {
        return Err(format!("--modes: '{m}' is not one of {}", MODES.join(", ")));
    }
    let rates: Vec<f64> = if o.rates.is_empty() {
        RATES.to_vec()
    } else {
        o.rates.clone()
    };
    if let Some(r) = rates.iter().find(|&&r| !(1.0..=10e6).contains(&r)) {
        return Err(format!(
            "--rates: {r} is not a rate (1..=10000000 packets per second)"
        ));
    }
    if let Some(w) = o.workers.iter().find(|&&w| !(1..=64).contains(&w)) {
        return Err(format!("--workers: {w} is out of range (1..=64)"));
    }
    if let Some(s) = o.senders.filter(|s| !(1..=64).contains(s)) {
        return Err(format!("--senders: {s} is out of range (1..=64)"));
    }
    let seconds = o.seconds.unwrap_or(if o.quick { 1.0 } else { 5.0 });
    if !(0.1..=3600.0).contains(&seconds) {
        return Err(format!("--seconds: {seconds} is out of range (0.1..=3600)"));
    }
    // The quick run sweeps two rates; a full one up to --sweep-to, or
    // until the generator falls short.
    let sweep = match (o.quick, o.sweep_to) {
        (_, to) if to <= 0.0 || o.tx.is_some() => Vec::new(),
        (true, _) => vec![10_000.0, 100_000.0],
        (false, to) => seed000::sweep_rates(to),
    };
    Ok((
        modes,
        Plan {
            rates,
            sweep,
            seconds,
            repeat: o.repeat.unwrap_or(1).max(1),
            workers: o.workers.clone(),
            senders: o.senders,
            segments: o.gso,
        },
    ))
}

/// The tep binary the namespaces' daemons run: `--tep`, else the `tep`
/// beside this binary.
fn tep_binary(o: &Options) -> Result<PathBuf, String> {
    find_tep(o.tep.as_deref())
}

/// `given`, else the `tep` beside this binary; an error when it is not
/// there.
pub(crate) fn find_tep(given: Option<&Path>) -> Result<PathBuf, String> {
    let tep = match given {
        Some(t) => t.to_path_buf(),
        None => {
            let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
            tep_testing::netns::tep_beside(&exe)
        }
    };
    if tep.is_file() {
        Ok(tep)
    } else {
        Err(format!(
            "no tep binary at {} (cargo build --release -p tep, or --tep PATH)",
            tep.display()
        ))
    }
}

/// Makes SIGINT and SIGTERM remove every namespace this process built
/// (their processes and files too) before it exits, as their drops would
/// have: a bench stopped with Ctrl-C leaves nothing behind. Call it before
/// any thread starts (the signals are blocked in every thread and read by
/// one).
pub(crate) fn clean_up_on_signals() -> Result<(), String> {
    let signals = Signals::new(&[Signal::Interrupt, Signal::Terminate])
        .map_err(|e| format!("signals: {e}"))?;
    std::thread::spawn(move || loop {
        match signals.read() {
            Ok(Some(_)) => {
                eprintln!(" interrupted: removing the namespaces");
                tep_testing::netns::remove_all();
                std::process::exit(130);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(_) => return,
        }
    });
    Ok(())
}

fn estimate_000(o: &Options, plan: &Plan) -> f64 {
    let modes = if o.modes.is_empty() {
        MODES.len()
    } else {
        o.modes.len()
    };
    let cases = match o.tx {
        None => modes * (plan.rates.len() * plan.repeat + plan.sweep.len()),
        Some(_) => plan.rates.len(),
    };
    cases as f64 * (plan.seconds + 1.5)
}

fn report_000(
    o: &Options,
    modes: &[String],
    plan: &Plan,
    tep: &Path,
) -> Result<SeedReport, String> {
    let modes: Vec<&str> = modes.iter().map(String::as_str).collect();
    let runs = match (&o.tx, &o.rx, o.dst) {
        (Some(tx), Some(rx), Some(dst)) => Runs {
            cases: external(tx, rx, dst, o.listen, &plan.rates, plan.seconds)?,
            sweep: Vec::new(),
        },
        _ => seed000::run_in_namespaces(tep, &modes, plan)?,
    };
    let passed = runs
        .cases
        .iter()
        .chain(&runs.sweep)
        .all(|c| c.report.received > 0);
    let free: serde_json::Map<String, serde_json::Value> = seed000::loss_free(&runs.sweep, &modes)
        .into_iter()
        .map(|(m, r)| (m, serde_json::json!(r)))
        .collect();
    let targets = seed000::targets(&runs);
    let text = seed000::table(&runs.cases)
        + &seed000::sweep_table(&runs, &modes)
        + &seed000::scaling_table(&runs, &modes);
    if let Some(dir) = &o.plot {
        if !runs.sweep.is_empty() {
            let path = super::plot::seed000_sweep(dir, &runs.sweep, &modes)
                .map_err(|e| format!("--plot: {e}"))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(SeedReport {
        seed: "000",
        text,
        json: serde_json::json!({
            "packet_len": PACKET_LEN,
            "seconds_per_case": plan.seconds,
            "setup": if o.tx.is_some() { "interfaces" } else { "namespaces" },
            "cases": runs.cases,
            "sweep": runs.sweep,
            "loss_free_pps": free,
            "repeat": plan.repeat,
        }),
        targets,
        charts: Vec::new(),
        passed,
    })
}

/// Seed 000 through a gateway the user runs: probes out of `tx`, GTP-U in
/// on `rx`; one case per rate, the gateway's checksum mode the user's.
fn external(
    tx: &str,
    rx: &str,
    dst: IpAddr,
    listen: SocketAddr,
    rates: &[f64],
    seconds: f64,
) -> Result<Vec<ProbeCase>, String> {
    let mut out = Vec::new();
    for &pps in rates {
        let stop = AtomicBool::new(false);
        let expected = (pps * seconds) as u64 + 1;
        let (tally, sent) = std::thread::scope(|scope| {
            let sink = scope.spawn(|| {
                seed000::sink(
                    listen,
                    Some(rx),
                    expected,
                    seed000::Count {
                        threads: 1,
                        framing: seed000::Framing::Gtpu,
                        gro: false,
                    },
                    &stop,
                    Duration::from_millis(300),
                )
            });
            std::thread::sleep(Duration::from_millis(100));
            let senders = seed000::Senders::one();
            let sent = seed000::send(
                SocketAddr::new(dst, 9),
                Some(tx),
                PACKET_LEN,
                pps,
                seconds,
                &senders,
            );
            stop.store(true, Ordering::Release);
            (sink.join(), sent)
        });
        let tally = tally
            .map_err(|_| "sink panicked".to_string())?
            .map_err(|err| format!("sink on {rx}: {err}"))?;
        let sent = sent.map_err(|err| format!("sender on {tx}: {err}"))?;
        out.push(ProbeCase {
            mode: "external".to_string(),
            offered_pps: pps,
            report: tally.report(sent.packets),
            generator_short: sent.achieved_pps < 0.95 * pps,
            sent,
            seed: None,
            workers: 0,
            seat: Default::default(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_two_seeds_share_runs_once_with_both_measurements() {
        let all = host_cases(&["002", "003"], false);
        let tep = all.iter().filter(|c| c.id == "tep vxlan full").count();
        assert_eq!(tep, 1);
        let c = all.iter().find(|c| c.id == "tep vxlan full").unwrap();
        assert!(c.stream && c.rr, "003 streams, 002 also pings");
        let both = host_cases(&["001", "004"], false);
        let ids: std::collections::BTreeSet<&str> = both
            .iter()
            .map(|c| c.id.as_str())
            .filter(|id| id.ends_with("full"))
            .collect();
        assert_eq!(ids.len(), 6, "{ids:?}");
        assert!(host_cases(&["000"], false).is_empty());
    }
}
