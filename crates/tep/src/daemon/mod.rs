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
pub mod dnn;
pub mod evpn;
pub mod idle;
pub mod liveness;
pub mod metrics;
pub mod n4;
pub mod n9;
pub mod notify;
pub mod overlay;
pub mod path;
pub mod privilege;
pub mod run;
pub mod state;
pub mod stats;
pub mod trace;
pub mod upf;
pub mod urr;

use state::State;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use tep_config::Config;
use tep_sys::{Signal, Signals};

/// Why a reload did not take.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new config is invalid, or changes what only a restart
    /// changes: the running workers go on with the old one.
    #[error("{0}")]
    Refused(String),
    /// The workers could not start again: the daemon has nothing
    /// running and stops, for its supervisor to start it afresh.
    #[error("{0}")]
    Failed(String),
}

impl ReloadError {
    /// With what the privilege drop has to do with it, if anything.
    fn explained(self, run_as: Option<&privilege::RunAs>) -> Self {
        match self {
            ReloadError::Refused(e) => ReloadError::Refused(privilege::explain(run_as, e)),
            ReloadError::Failed(e) => ReloadError::Failed(privilege::explain(run_as, e)),
        }
    }
}

/// A reload request and where to answer it (`tep reload`); `None` for
/// SIGHUP.
pub type ReloadReply = Option<mpsc::Sender<Result<(), String>>>;

/// The main thread's loop of either run mode: waits for signals and
/// reload requests; runs `reload` for SIGHUP and each `tep reload`
/// (answering the latter), and returns on SIGTERM or SIGINT for the mode
/// to stop its workers, or with an error once a reload left no workers
/// running.
pub fn until_stopped(
    path: &Path,
    signals: &Signals,
    state: &State,
    reloads: &mpsc::Receiver<mpsc::Sender<Result<(), String>>>,
    mut reload: impl FnMut() -> Result<(), ReloadError>,
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
                Err(ReloadError::Refused(e)) => {
                    tracing::error!("reload refused, the running config stays: {e}")
                }
                Err(ReloadError::Failed(e)) => tracing::error!("reload failed: {e}"),
            }
            let failed = matches!(result, Err(ReloadError::Failed(_)));
            if let Some(r) = reply {
                let _ = r.send(result.map_err(|e| e.to_string()));
            }
            if failed {
                notifier.stopping();
                return Err("the workers did not start again after a reload".to_string());
            }
        }
    }
}

/// Where `tep show` finds the daemon: `--socket`, else the config's
/// `host.control` or `gateway.control`, else the default.
/// The instant the workers' clocks count from (the pipeline's
/// nanoseconds): one for the process, so that workers sharing a
/// session's MBR bucket read the same time (a worker started later with
/// its own zero would look minutes behind the others).
pub fn epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

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
