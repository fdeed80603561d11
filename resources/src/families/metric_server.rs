//! The `MetricServer` family: where the cluster ships its metrics (`/cluster/metrics/server`,
//! cluster-wide; InfluxDB, Graphite, OpenTelemetry), from the schema ([`Declared`]).
//! pve-manager `PVE/API2/Cluster/MetricServer.pm` over `PVE/Status/Plugin.pm`:
//!
//! - **Created on the object path** (`POST /cluster/metrics/server/{id}`: the collection has
//!   no create). `type` is create-only: a read answering another type is a refusal naming
//!   both (S18), never absence and never a convert.
//! - **`server` and `port` go with every update**: the update requires both.
//! - **Secrets are write-only** (S26): the InfluxDB `token` (kept under
//!   `/etc/pve/priv/metricserver/`, never read back) and the OpenTelemetry `otel-headers`.
//!   PVE returns `otel-headers` in plain on a read, and it usually holds a bearer token; it
//!   is treated as write-only rather than compared by a hash because a hash in the state file
//!   lets whoever reads the state test guesses of the secret offline, and the engine already
//!   has the word for "send it again": the rotation marker. Neither value reaches state, plans
//!   or logs; a changed value is sent when the marker moves. The price: a header changed by
//!   hand on the cluster is not seen as drift.
//! - **No digest is readable** (neither the read nor the list returns one): the server is in
//!   the `status.cfg` domain, so writes run one at a time, each after a fresh read compared
//!   with the plan's (S31).
//! - PVE tests the connection on every create and update unless the server is disabled, and
//!   OpenTelemetry even then (`PVE/Status/OpenTelemetry.pm` `test_connection`): the plan says
//!   so under each write, as a target that is down fails it.
//! - Dropped from the declaration, a server is kept (S20): removing one silently stops the
//!   graphs.

use pve_sdk::generated::cluster::metrics::server::id::{
    CreateMetricServer, CreateMetricServerType, DeleteMetricServer, ReadMetricServer,
    UpdateMetricServer,
};

use crate::families::config::{Carried, Unset};
use crate::families::schema::{Declared, Object};

/// A declared metric server: `MetricServer::influxdb("influx", "10.0.0.5", 8086)`, or any
/// field of its create request.
pub type MetricServer = Declared<MetricServerObject>;

/// What the schema names of a metric server.
#[derive(Debug)]
pub struct MetricServerObject;

impl Object for MetricServerObject {
    const KIND: crate::contract::Kind = crate::families::kinds::METRIC_SERVER;
    const ID: &'static [&'static str] = &["id"];
    type Create = CreateMetricServer;
    type Read = ReadMetricServer;
    type Update = UpdateMetricServer;
    type Delete = DeleteMetricServer;

    /// `update` removes what `delete` names (and refuses setting and deleting one key).
    fn unset() -> Unset {
        Unset::Delete
    }

    /// The update requires `server` and `port` (`PVE/Status/Plugin.pm` options: not optional).
    fn carried() -> Carried {
        &[&[&["server"]], &[&["port"]]]
    }

    /// S31 without a digest: `status.cfg`.
    fn domain(d: &MetricServer) -> Option<String> {
        let _ = d;
        Some("status.cfg".to_owned())
    }

    fn summary(d: &MetricServer) -> Vec<String> {
        let kind = d.spec.type_.to_string();
        let test = match (d.spec.disable, kind.as_str()) {
            (_, "opentelemetry") => "PVE tests the connection on every write, even disabled",
            (Some(true), _) => "disabled: PVE does not test the connection",
            _ => "PVE tests the connection on every write: an unreachable target fails it",
        };
        vec![format!(
            "ships metrics to {kind} at {}:{}; {test}",
            d.spec.server, d.spec.port
        )]
    }
}

impl MetricServer {
    /// An InfluxDB server `id` at `server:port` (UDP unless `influxdbproto` says otherwise).
    pub fn influxdb(id: impl Into<String>, server: impl Into<String>, port: u16) -> Self {
        let t = CreateMetricServerType::Influxdb;
        MetricServer::of(CreateMetricServer::new(id, i64::from(port), server, t))
    }

    /// A Graphite server `id` at `server:port`.
    pub fn graphite(id: impl Into<String>, server: impl Into<String>, port: u16) -> Self {
        let t = CreateMetricServerType::Graphite;
        MetricServer::of(CreateMetricServer::new(id, i64::from(port), server, t))
    }

    /// Manages the write-only InfluxDB token (S26): sent at create and again when `rotation`
    /// differs from the recorded marker; only the marker is recorded.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>, rotation: impl Into<String>) -> Self {
        self.spec.token = Some(pve_sdk::Secret::new(token.into()));
        self.secret_rotation = Some(rotation.into());
        self
    }
}
