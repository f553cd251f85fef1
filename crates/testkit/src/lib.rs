//! rackflow's test kit (dev-only, never published): the one copy of what
//! the integration tests of every crate share.
//!
//! - [`db`]: the store under test — SQLite always, PostgreSQL when
//!   `DATABASE_URL` is set (a fresh database per test, dropped afterwards);
//!   under `CI` a missing `DATABASE_URL` fails instead of skipping — and
//!   the [`both_stores!`] macro that runs a test body on each.
//! - [`changes`]: a store wrapper that reports every write, so a test waits
//!   for the next write instead of sleeping between reads.
//! - [`flow`]: a flow server in-process on a free loopback port with a
//!   client ([`flow::TestServer`]; [`flow::TestServer::extensions`] is the
//!   one place naming the client of our own RPCs), replicas on one database
//!   ([`flow::Replica`]), a server on its own runtime thread for synchronous
//!   tests ([`flow::ThreadServer`]), and the fixtures (racks, run requests)
//!   the flow tests build on.
//! - [`wait`]: waits that follow events — a run through its
//!   `WatchOperationRun` stream, a child process's output and exit — each
//!   with a deadline and a panic naming what it waited for; and the one
//!   bounded retry, for what publishes no event.
//! - [`grpc`]: gRPC health and reflection as a test reads them.
//! - [`artifacts`]: an HTTP artifact server (what firmware objects' manifests
//!   point at) on a free loopback port.
//! - [`rms`]: a rack manager on a free port with a client (its job waits
//!   are bounded retries: the rack manager publishes no job events).
//! - [`pg_instance`]: a private PostgreSQL server a test may stop and
//!   start again ([`pg_instance::PgInstance`]), and a fresh database on a
//!   given server ([`pg_instance::PgDatabase`]).
//! - [`redfish`]: the Redfish emulator (sushy-tools) and a file server.
//! - [`pki`]: a CA, server and client certificates made at test time, for
//!   the TLS / mTLS and authorization tests.
//! - [`temporal`]: a Temporal development server a test may stop and start
//!   again ([`temporal::TemporalDevServer`]).

pub mod artifacts;
pub mod changes;
pub mod db;
pub mod flow;
pub mod grpc;
pub mod metrics;
pub mod pg_instance;
pub mod pki;
pub mod redfish;
pub mod rms;
pub mod temporal;
pub mod wait;

pub use db::Backend;
pub use flow::*;
