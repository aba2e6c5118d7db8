//! The `sluice` binary's wiring: its configuration ([`config`]), what a node holds at once on
//! the machine it runs on ([`budget`]), starting a node with its
//! HTTP and gRPC servers and stopping it gracefully ([`server`]), and the one-node development
//! cluster ([`dev`]). The binary is the one place that holds every crate: the Raft node it
//! starts is handed to the operations (`sluice-ops`), which the edges (`sluice-web`,
//! `sluice-grpc`) serve; `sluice ctl` is `sluice-ctl`.

pub mod budget;
pub mod config;
pub mod dev;
pub mod server;
