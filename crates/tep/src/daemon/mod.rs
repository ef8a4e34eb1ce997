//! What both run modes of `tep run` share around their workers: the state
//! the control thread and the metrics listener read ([`state`]), the
//! counters workers publish ([`stats`]), which serving threads are alive
//! for systemd's watchdog ([`liveness`], [`notify`]), the control socket behind
//! `tep show`, `tep trace` and `tep reload` ([`control`]), when workers
//! sleep ([`idle`]), the Prometheus
//! endpoint ([`metrics`]), packet capture at the I/O edges ([`trace`]) and
//! dropping root once set up ([`privilege`]).
//! Host mode ([`crate::host`]) and gateway mode fill them; nothing here
//! knows which one runs.

pub mod clients;
pub mod control;
pub mod idle;
pub mod liveness;
pub mod metrics;
pub mod n4;
pub mod notify;
pub mod privilege;
pub mod state;
pub mod stats;
pub mod trace;
pub mod upf;

use state::State;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use tep_config::Config;
use tep_sys::{Signal, Signals};

/// A reload request and where to answer it (`tep reload`); `None` for
/// SIGHUP.
pub type ReloadReply = Option<mpsc::Sender<Result<(), String>>>;

/// The main thread's loop of either run mode: waits for signals and
/// reload requests; runs `reload` for SIGHUP and each `tep reload`
/// (answering the latter), and returns on SIGTERM or SIGINT for the mode
/// to stop its workers.
pub fn until_stopped(
    path: &Path,
    signals: &Signals,
    state: &State,
    reloads: &mpsc::Receiver<mpsc::Sender<Result<(), String>>>,
    mut reload: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let epoll = tep_sys::Epoll::new().map_err(|e| e.to_string())?;
    epoll
        .add(signals.as_raw_fd(), 0, true, false)
        .map_err(|e| e.to_string())?;
    epoll
        .add(state.main_wake.as_raw_fd(), 1, true, false)
        .map_err(|e| e.to_string())?;
    let mut events = Vec::with_capacity(4);
    let mut notifier = notify::Notifier::from_env();
    let workers = || state.wakes.lock().unwrap_or_else(|e| e.into_inner()).len();
    notifier.ready(&format!("{} worker(s) running", workers()));
    loop {
        if let Err(e) = epoll.wait(&mut events, notifier.wait_ms(1000)) {
            tracing::error!("epoll: {e}");
        }
        notifier.tend(&state.shared.liveness);
        let mut asked: Vec<ReloadReply> = Vec::new();
        while let Ok(Some(sig)) = signals.read() {
            match sig {
                Signal::Hangup => asked.push(None),
                Signal::Terminate | Signal::Interrupt => {
                    tracing::info!(signal = ?sig, "stopping: draining the workers");
                    notifier.stopping();
                    return Ok(());
                }
            }
        }
        let _ = state.main_wake.drain();
        while let Ok(reply) = reloads.try_recv() {
            asked.push(Some(reply));
        }
        for reply in asked {
            notifier.reloading();
            let result = reload();
            // Running either way: the new config, or the old one kept.
            notifier.ready(&format!("{} worker(s) running", workers()));
            match &result {
                Ok(()) => tracing::info!("reloaded {}", path.display()),
                Err(e) => tracing::error!("reload refused, the running config stays: {e}"),
            }
            if let Some(r) = reply {
                let _ = r.send(result);
            }
        }
    }
}

/// Where `tep show` finds the daemon: `--socket`, else the config's
/// `host.control` or `gateway.control`, else the default.
pub fn control_path(socket: Option<PathBuf>, config: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(s) = socket {
        return Ok(s);
    }
    if let Some(c) = config {
        let config = Config::load(c).map_err(|e| e.to_string())?;
        return Ok(PathBuf::from(match &config.gateway {
            Some(g) => g.control.clone(),
            None => config.host.control,
        }));
    }
    Ok(PathBuf::from(tep_config::DEFAULT_CONTROL))
}
