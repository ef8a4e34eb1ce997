//! `tep run`'s lifecycle, written once for both run modes: signals, the
//! config loaded and checked, the UPF's N4 side, the control and metrics
//! listeners, the privilege drop, the workers started, reloaded and
//! stopped. A run mode ([`Mode`]: [`crate::host`], [`crate::gateway`])
//! supplies only its I/O: what it opens, what its workers run, how it
//! follows a new config.

use super::evpn;
use super::liveness::{self, Beat};
use super::overlay::Sweeper;
use super::state::{IoInfo, KernelCounters, Shared, State};
use super::stats::WorkerSnapshot;
use super::{control, metrics, n4, privilege, until_stopped, ReloadError};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tep_config::{Capabilities, Config, ConfigError};
use tep_dataplane::overlay::Overlay;
use tep_dataplane::session::control::Sessions;
use tep_dataplane::session::WorkerLink;
use tep_sys::{EventFd, Signal, Signals};

/// The longest a stopping worker keeps serving packets already queued.
pub const DRAIN_LIMIT: Duration = Duration::from_millis(200);
/// How often a worker publishes its counters without being asked.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(200);

/// What the mode's section of the config says of the parts every mode
/// has.
#[derive(Debug)]
pub struct Section<'a> {
    /// `host` or `gateway`: the prefix of the fields named in errors.
    pub name: &'static str,
    /// `*.control`.
    pub control: &'a str,
    /// `*.control_group`.
    pub control_group: Option<&'a str>,
    /// `*.metrics`.
    pub metrics: Option<SocketAddr>,
    /// `*.queues`: one worker each.
    pub queues: usize,
    /// `*.user`: who to become once set up.
    pub user: Option<&'a str>,
    /// `*.group`.
    pub group: Option<&'a str>,
    /// `*.capabilities`: what that user keeps.
    pub capabilities: Capabilities,
}

/// What every worker gets, whatever the mode.
#[derive(Debug)]
pub struct WorkerCommon {
    /// Position among the workers (its snapshot slot).
    pub index: usize,
    /// The validated config.
    pub config: Arc<Config>,
    /// Wakes the worker (stop, refresh, trace).
    pub wake: Arc<EventFd>,
    /// Shared with the control thread.
    pub shared: Arc<Shared>,
    /// A UPF worker's link to the session tables' control plane, and its
    /// downlink buffers (`[pfcp].buffer_packets`, `buffer_limit`).
    pub sessions: Option<(WorkerLink, u32, u32)>,
    /// The networks' shared tables (FDB, VTEPs, topology, neighbours),
    /// when the config has `[[network]]`s.
    pub overlay: Option<Arc<Overlay>>,
}

/// A run mode: its I/O, opened at start, driven by its workers, and
/// following a reloaded config.
pub trait Mode: Sized {
    /// What [`Mode::open`] holds until root is dropped.
    type Opened;
    /// One worker's descriptors, handed back when it stops so that a
    /// reload reuses them.
    type Io: Send + 'static;
    /// Everything one worker starts with.
    type Setup: Send + 'static;
    /// What a reload binds or changes before the running workers stop.
    type Staged;

    /// The config runs this mode and keeps the mode's own rules: its
    /// section.
    fn check(config: &Config) -> Result<Section<'_>, ConfigError>;
    /// Opens what needs root (devices, sockets, XDP programs): one
    /// [`Mode::Io`] per worker.
    fn open(config: &Config) -> Result<(Self::Opened, Vec<Self::Io>), String>;
    /// Root dropped, before the workers: the mode's own threads, what
    /// `tep show` reports of its I/O and the kernel's counters it reads.
    fn serve(
        opened: Self::Opened,
        config: &Config,
        ios: &[Self::Io],
        shared: &Arc<Shared>,
    ) -> Result<(Self, IoInfo, Box<dyn KernelCounters>), String>;
    /// The state shared and the workers running: what else watches it.
    fn watch(&mut self, _state: &Arc<State>) -> Result<(), String> {
        Ok(())
    }
    /// Worker `common.index`'s setup.
    fn setup(&self, io: Self::Io, common: WorkerCommon) -> Self::Setup;
    /// A worker: runs until `shared.stop`, returns its descriptors.
    fn work(setup: Self::Setup, beat: &Beat) -> std::io::Result<Self::Io>;
    /// A reload, before anything stops: refuses what needs a restart and
    /// binds what the new config adds.
    fn stage(&mut self, old: &Config, new: &Config) -> Result<Self::Staged, String>;
    /// A reload, the workers stopped: the config and descriptors they
    /// restart with (the old config where the new one could not be
    /// applied, with why).
    fn switch(
        &mut self,
        staged: Self::Staged,
        configs: (Arc<Config>, Arc<Config>),
        ios: Vec<Self::Io>,
        state: &State,
    ) -> (Arc<Config>, Vec<Self::Io>, Result<(), String>);
    /// The workers stopped for good: leaves the host as it was.
    fn stop(self);
}

/// The running workers of one config.
struct Workers<Io> {
    config: Arc<Config>,
    handles: Vec<JoinHandle<std::io::Result<Io>>>,
    wakes: Vec<Arc<EventFd>>,
    /// A UPF's: each worker's link to the session tables (kept across
    /// reloads: the sessions outlive the workers).
    links: Vec<WorkerLink>,
    /// The overlay of `config`.
    overlay: Option<Arc<Overlay>>,
}

impl<Io: Send + 'static> Workers<Io> {
    fn start<M: Mode<Io = Io>>(
        mode: &M,
        config: Arc<Config>,
        ios: Vec<Io>,
        shared: &Arc<Shared>,
        links: Vec<WorkerLink>,
        overlay: Option<Arc<Overlay>>,
    ) -> Result<Self, String> {
        shared.stop.store(false, Ordering::Release);
        shared
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // Workers started so far: stopped again if a later one cannot
        // start, so that none runs on unwatched and unstoppable.
        let mut started = Workers {
            config: config.clone(),
            handles: Vec::new(),
            wakes: Vec::new(),
            links,
            overlay,
        };
        for (index, io) in ios.into_iter().enumerate() {
            let wake = match EventFd::new() {
                Ok(w) => Arc::new(w),
                Err(e) => {
                    started.stop(shared);
                    return Err(format!("eventfd: {e}"));
                }
            };
            let common = WorkerCommon {
                index,
                config: config.clone(),
                wake: wake.clone(),
                shared: shared.clone(),
                sessions: match (&config.pfcp, started.links.get(index)) {
                    (Some(p), Some(l)) => Some((l.clone(), p.buffer_packets, p.buffer_limit)),
                    _ => None,
                },
                overlay: started.overlay.clone(),
            };
            let setup = mode.setup(io, common);
            match liveness::spawn(
                &shared.liveness,
                &format!("worker-{index}"),
                Duration::ZERO,
                move |beat| M::work(setup, beat),
            ) {
                Ok(h) => {
                    started.handles.push(h);
                    started.wakes.push(wake);
                }
                Err(e) => {
                    started.stop(shared);
                    return Err(format!("cannot start a worker: {e}"));
                }
            }
        }
        Ok(started)
    }

    /// Stops the workers and takes their descriptors back.
    fn stop(self, shared: &Shared) -> Vec<Io> {
        shared.stop.store(true, Ordering::Release);
        for w in &self.wakes {
            let _ = w.notify();
        }
        let mut ios = Vec::new();
        for h in self.handles {
            match h.join() {
                Ok(Ok(io)) => ios.push(io),
                Ok(Err(e)) => tracing::error!("worker stopped on an error: {e}"),
                Err(_) => tracing::error!("worker panicked"),
            }
        }
        ios
    }

    /// Takes the running workers out, leaving none running with the same
    /// config and links.
    fn take(&mut self) -> Self {
        let idle = Workers {
            config: self.config.clone(),
            handles: Vec::new(),
            wakes: Vec::new(),
            links: self.links.clone(),
            overlay: self.overlay.clone(),
        };
        std::mem::replace(self, idle)
    }
}

/// Worker `index`'s counters, for the control thread and the metrics.
pub fn publish(shared: &Shared, index: usize, snapshot: WorkerSnapshot) {
    let mut all = shared.snapshots.lock().unwrap_or_else(|e| e.into_inner());
    if all.len() <= index {
        all.resize(index + 1, WorkerSnapshot::default());
    }
    all[index] = snapshot;
    drop(all);
    shared.published.notify_all();
}

/// `tep run -c FILE` in mode `M`: runs until SIGTERM or SIGINT. Errors are
/// for the user: they name the field or the call that failed.
pub fn run<M: Mode>(path: &Path) -> Result<(), String> {
    // Blocked before any thread starts, so that every thread inherits the
    // mask and the signals arrive only through the signalfd.
    let signals = Signals::new(&[Signal::Terminate, Signal::Interrupt, Signal::Hangup])
        .map_err(|e| format!("signalfd: {e}"))?;
    let config = Config::load(path).map_err(|e| e.to_string())?;
    let section = M::check(&config).map_err(|e| e.to_string())?;
    let overlay = overlay_of(&config)?;
    let run_as = privilege::of(&section)?;
    let (opened, ios) = M::open(&config)?;
    let evpn_devices = evpn::open(&config)?;
    let control = control::listen(
        &format!("{}.control", section.name),
        section.control,
        section.control_group,
    )?;
    let metrics = section
        .metrics
        .map(|addr| metrics::listen(&format!("{}.metrics", section.name), addr))
        .transpose()?;
    let (name, queues, control_path) = (section.name, section.queues, section.control.to_string());
    let pfcp = config
        .pfcp
        .as_ref()
        .map(|p| n4::bind(p).map(|socket| (p.max_sessions, socket)))
        .transpose()?;
    // Everything that needs root is set up; the threads started from here
    // on inherit what the main thread keeps (credentials are per thread).
    if let Some(r) = &run_as {
        r.apply()?;
        r.check_readable(path);
    }
    let shared = Arc::new(Shared::default());
    let (mut mode, info, kernel) = M::serve(opened, &config, &ios, &shared)?;
    let (reload_tx, reload_rx) = mpsc::channel();
    let config = Arc::new(config);
    let state = Arc::new(State {
        config: Mutex::new(config.clone()),
        io: Mutex::new(info),
        wakes: Mutex::new(Vec::new()),
        shared: shared.clone(),
        reload: Mutex::new(reload_tx),
        main_wake: EventFd::new().map_err(|e| format!("eventfd: {e}"))?,
        kernel,
        overlay: Mutex::new(overlay.clone()),
        evpn: std::sync::OnceLock::new(),
    });
    // A UPF: the session tables' control plane and its links to the
    // workers.
    let (sessions, links) = match pfcp {
        Some((max_sessions, socket)) => {
            let n3_v6 = config.tunnels.iter().map(|t| t.local.is_ipv6()).collect();
            let (s, l) = Sessions::new(max_sessions, queues, n3_v6);
            (Some((s, socket)), l)
        }
        None => (None, Vec::new()),
    };
    let mut running = Workers::start(&mode, config.clone(), ios, &shared, links, overlay)?;
    let sweeper = Sweeper::start(state.clone(), &shared.liveness)?;
    let evpn = evpn_devices
        .map(|d| evpn::Evpn::start(d, &config, state.clone(), &shared.liveness))
        .transpose()?;
    if let Some(e) = &evpn {
        let _ = state.evpn.set(e.views.clone());
    }
    *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
    let n4 = match sessions {
        Some((sessions, socket)) => Some(n4::N4::start(&config, socket, sessions, state.clone())?),
        None => None,
    };
    mode.watch(&state)?;
    let control = control.serve(state.clone())?;
    if let Some(listener) = metrics {
        metrics::serve_on(listener, state.clone())?;
    }
    tracing::info!(
        tunnels = config.tunnels.len(),
        workers = queues,
        control = control_path.as_str(),
        "tep running ({name})"
    );
    let stopped = until_stopped(path, &signals, &state, &reload_rx, || {
        reload(path, &mut mode, &mut running, &state, n4.as_ref())
            .map_err(|e| e.explained(run_as.as_ref()))
    });
    if let Some(n) = n4 {
        n.stop();
    }
    // The workers' descriptors close, then the mode takes down the rest.
    drop(running.stop(&shared));
    drop(sweeper);
    // Its kernel devices go: zebra withdraws this VTEP's routes.
    drop(evpn);
    mode.stop();
    control.remove();
    tracing::info!("stopped");
    stopped
}

/// Re-reads the config and restarts the workers with it. Refused (the
/// running workers left alone) when it is invalid or changes what only a
/// restart changes; failed when the workers could not start again.
fn reload<M: Mode>(
    path: &Path,
    mode: &mut M,
    running: &mut Workers<M::Io>,
    state: &State,
    n4: Option<&n4::N4>,
) -> Result<(), ReloadError> {
    let shared = &state.shared;
    let new = Config::load(path).map_err(|e| ReloadError::Refused(e.to_string()))?;
    M::check(&new).map_err(|e| ReloadError::Refused(e.to_string()))?;
    let old = running.config.clone();
    n4::check_kept(&old, &new).map_err(ReloadError::Refused)?;
    evpn::check_kept(&old, &new).map_err(ReloadError::Refused)?;
    let next = overlay_of(&new).map_err(ReloadError::Refused)?;
    let staged = mode.stage(&old, &new).map_err(ReloadError::Refused)?;
    let stopped = running.take();
    let links = stopped.links.clone();
    let ios = stopped.stop(shared);
    shared.carry_over(&old);
    let new = Arc::new(new);
    let (config, ios, result) = mode.switch(staged, (old.clone(), new.clone()), ios, state);
    // The workers are stopped: nothing learns into the old overlay now.
    let overlay = match (Arc::ptr_eq(&config, &new), &running.overlay) {
        (true, Some(was)) => next.inspect(|o| carry_over(o, was, &old)),
        (true, None) => next,
        (false, _) => running.overlay.clone(),
    };
    *state.overlay.lock().unwrap_or_else(|e| e.into_inner()) = overlay.clone();
    // The new workers' session tables start empty: every session is
    // queued for them before they run.
    if let Some(n) = n4 {
        n.replay();
    }
    *running = Workers::start(mode, config.clone(), ios, shared, links, overlay)
        .map_err(ReloadError::Failed)?;
    *state.wakes.lock().unwrap_or_else(|e| e.into_inner()) = running.wakes.clone();
    *state.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
    result.map_err(ReloadError::Refused)
}

/// The overlay of `config`'s networks; None when it has none.
fn overlay_of(config: &Config) -> Result<Option<Arc<Overlay>>, String> {
    if !config.tunnels.iter().any(|t| t.is_network()) {
        return Ok(None);
    }
    let o = Overlay::new(
        &config.tunnels,
        config.fdb_entries(),
        config.overlay.max_vteps,
    )
    .map_err(|e| format!("[[network]]: {e}"))?;
    Ok(Some(Arc::new(o)))
}

/// A reload's new overlay takes over what the old one learned and what
/// the verbs added to it (`old` was its config).
fn carry_over(new: &Overlay, old: &Overlay, config: &Config) {
    let c = new.carry_over(old, &config.tunnels);
    tracing::info!(
        fdb = c.fdb,
        topology = c.topology,
        neighbours = c.neighbours,
        refused = c.refused,
        "overlay: the new config's tables took over what the old ones learned and were told"
    );
}
