//! What both run modes of `tep run` share around their workers: the state
//! the control thread and the metrics listener read ([`state`]), the
//! counters workers publish ([`stats`]), the control socket behind
//! `tep show`, `tep trace` and `tep reload` ([`control`]), the Prometheus
//! endpoint ([`metrics`]) and packet capture at the I/O edges ([`trace`]).
//! Host mode ([`crate::host`]) and gateway mode fill them; nothing here
//! knows which one runs.

pub mod control;
pub mod metrics;
pub mod state;
pub mod stats;
pub mod trace;
