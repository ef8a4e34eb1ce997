//! `tep bench seeds`: the experiments of the seed documents, rerun here and
//! shown beside the figures the seeds published. Seed 000 is reproduced
//! ([`super::seed000`]); 001-004 are not yet, and saying so is the answer
//! for them.

use super::seed000::{self, Case, Plan, Runs, PACKET_LEN, RATES};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Seed 000 between interfaces the user names, through a gateway the user
/// runs.
#[derive(Clone, Debug)]
pub struct External {
    pub tx: String,
    pub rx: String,
    pub dst: IpAddr,
    pub listen: SocketAddr,
}

/// What `tep bench seeds` was asked.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub seeds: Vec<String>,
    pub quick: bool,
    pub json: bool,
    pub seconds: Option<f64>,
    pub modes: Vec<String>,
    pub rates: Vec<f64>,
    /// The sweep's highest offered rate (0: no sweep).
    pub sweep_to: f64,
    /// Where to write PNG charts.
    pub plot: Option<std::path::PathBuf>,
    /// Rounds of the seed's rates.
    pub repeat: usize,
    pub external: Option<External>,
}

/// The seeds this command reproduces.
const REPRODUCED: [&str; 1] = ["000"];
/// The checksum modes of seed 000's gateway.
const MODES: [&str; 4] = ["zero", "full", "offload", "lco"];

pub fn command(o: &Options) -> ExitCode {
    for s in &o.seeds {
        if !REPRODUCED.contains(&s.as_str()) {
            eprintln!(
                "tep bench seeds: seed {s} is not reproduced yet (reproduced: {})",
                REPRODUCED.join(", ")
            );
            return ExitCode::from(2);
        }
    }
    let modes: Vec<&str> = if o.modes.is_empty() {
        MODES.to_vec()
    } else {
        o.modes.iter().map(String::as_str).collect()
    };
    if let Some(m) = modes.iter().find(|m| !MODES.contains(m)) {
        eprintln!(
            "tep bench seeds: --modes: '{m}' is not one of {}",
            MODES.join(", ")
        );
        return ExitCode::from(2);
    }
    let rates: Vec<f64> = if o.rates.is_empty() {
        RATES.to_vec()
    } else {
        o.rates.clone()
    };
    if let Some(r) = rates.iter().find(|&&r| !(1.0..=10e6).contains(&r)) {
        eprintln!("tep bench seeds: --rates: {r} is not a rate (1..=10000000 packets per second)");
        return ExitCode::from(2);
    }
    let seconds = o.seconds.unwrap_or(if o.quick { 1.0 } else { 5.0 });
    if !(0.1..=3600.0).contains(&seconds) {
        eprintln!("tep bench seeds: --seconds: {seconds} is out of range (0.1..=3600)");
        return ExitCode::from(2);
    }
    // The quick run sweeps two rates; a full one up to --sweep-to, or
    // until the generator falls short.
    let sweep = match (o.quick, o.sweep_to) {
        (_, to) if to <= 0.0 => Vec::new(),
        (true, _) => vec![10_000.0, 100_000.0],
        (false, to) => seed000::sweep_rates(to),
    };
    let plan = Plan {
        rates,
        sweep: if o.external.is_some() {
            Vec::new()
        } else {
            sweep
        },
        seconds,
        repeat: o.repeat.max(1),
    };
    let cases = match &o.external {
        None => modes.len() * (plan.rates.len() * plan.repeat + plan.sweep.len()),
        Some(_) => plan.rates.len(),
    };
    if !o.json {
        eprintln!(
            "seed 000: up to {cases} case(s) of {seconds} s, at most about {:.0} s in all",
            cases as f64 * (seconds + 1.5)
        );
    }
    let started = Instant::now();
    let result = match &o.external {
        None => seed000::run_in_namespaces(&modes, &plan),
        Some(e) => external(e, &plan.rates, seconds).map(|cases| Runs {
            cases,
            sweep: Vec::new(),
        }),
    };
    let runs = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tep bench seeds: {e}");
            return ExitCode::FAILURE;
        }
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
    if o.json {
        let v = serde_json::json!({
            "seeds": {
                "000": {
                    "packet_len": PACKET_LEN,
                    "seconds_per_case": seconds,
                    "setup": if o.external.is_some() { "interfaces" } else { "namespaces" },
                    "cases": runs.cases,
                    "sweep": runs.sweep,
                    "loss_free_pps": free,
                    "repeat": plan.repeat,
                    "targets": targets,
                }
            },
            "not_reproduced": ["001", "002", "003", "004"],
            "seconds_total": started.elapsed().as_secs_f64(),
        });
        println!("{v}");
    } else {
        print!("{}", seed000::table(&runs.cases));
        print!("{}", seed000::sweep_table(&runs, &modes));
        print!("{}", seed000::targets_text(&targets));
        println!("seeds 001-004: not reproduced yet");
    }
    if let Some(dir) = &o.plot {
        if !runs.sweep.is_empty() {
            match super::plot::seed000_sweep(dir, &runs.sweep, &modes) {
                Ok(path) => eprintln!("wrote {}", path.display()),
                Err(e) => {
                    eprintln!("tep bench seeds: --plot: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Seed 000 through a gateway the user runs: probes out of `tx`, GTP-U in
/// on `rx`; one case per rate, the gateway's checksum mode the user's.
fn external(e: &External, rates: &[f64], seconds: f64) -> Result<Vec<Case>, String> {
    let mut out = Vec::new();
    for &pps in rates {
        let stop = AtomicBool::new(false);
        let expected = (pps * seconds) as u64 + 1;
        let (tally, sent) = std::thread::scope(|scope| {
            let sink = scope.spawn(|| {
                seed000::sink(
                    e.listen,
                    Some(&e.rx),
                    expected,
                    &stop,
                    Duration::from_millis(300),
                )
            });
            std::thread::sleep(Duration::from_millis(100));
            let sent = seed000::send(
                SocketAddr::new(e.dst, 9),
                Some(&e.tx),
                PACKET_LEN,
                pps,
                seconds,
            );
            stop.store(true, Ordering::Release);
            (sink.join(), sent)
        });
        let tally = tally
            .map_err(|_| "sink panicked".to_string())?
            .map_err(|err| format!("sink on {}: {err}", e.rx))?;
        let sent = sent.map_err(|err| format!("sender on {}: {err}", e.tx))?;
        out.push(Case {
            mode: "external".to_string(),
            offered_pps: pps,
            report: tally.report(sent.packets),
            generator_short: sent.achieved_pps < 0.95 * pps,
            sent,
            seed: None,
        });
    }
    Ok(out)
}
