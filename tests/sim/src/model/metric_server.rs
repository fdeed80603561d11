//! Metric servers: pve-manager `PVE/API2/Cluster/MetricServer.pm` (server_index, read, create,
//! update, delete) over `status.cfg`, with `PVE/Status/Plugin.pm`'s section config. Stored in
//! the collections' store under `metric_server`. Modelled: the create on the object path, the
//! exists and missing answers, the InfluxDB `token` kept out of `status.cfg` (PVE writes it
//! to `/etc/pve/priv/metricserver/<id>.pw` through `on_add_hook`, never read back), the
//! typed index (id, type, server, port, disable), the update's `delete` refusals, the delete
//! of a missing server croaking from `SectionConfig::lookup`. Not modelled: `test_connection`
//! (every target answers here), the digest (PVE's reads return none to send).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::api::{fail, ok, Answer, Call};
use crate::state::Cluster;

/// The store key.
pub const KIND: &str = "metric_server";

/// The parameters kept out of `status.cfg` (`extract_sensitive_params($param, ['token'])`).
const SENSITIVE: &[&str] = &["token"];

/// Options that may not be deleted: required by every plugin (`server`, `port`) or fixed.
const REQUIRED: &[&str] = &["server", "port", "type"];

/// Answers a metric server call, or `None` for every other operation.
pub(crate) fn dispatch(cluster: &mut Cluster, call: &Call<'_>) -> Option<Answer> {
    let op = call.op;
    let on_item = match op.path.as_str() {
        "/cluster/metrics/server" => false,
        "/cluster/metrics/server/{id}" => true,
        _ => return None,
    };
    let servers = cluster.collections.entry(KIND).or_default();
    let id = call.get("id").map(str::to_owned);
    Some(match (op.method.as_str(), on_item) {
        ("GET", false) => {
            // server_index: exactly these five keys, `disable` defaulting to 0.
            let rows = servers
                .iter()
                .map(|(id, f)| {
                    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
                    json!({
                        "id": id,
                        "disable": get("disable").parse::<i64>().unwrap_or(0),
                        "type": get("type"),
                        "server": get("server"),
                        "port": get("port").parse::<i64>().unwrap_or(0),
                    })
                })
                .collect();
            ok(Value::Array(rows))
        }
        ("GET", true) => {
            let id = id?;
            match servers.get(&id) {
                None => fail(500, format!("status server entry '{id}' does not exist")),
                // The section as parsed: its keys and `type`, typed as the plugin says.
                Some(f) => ok(Value::Object(
                    f.iter()
                        .map(|(k, v)| {
                            let v = match k.as_str() {
                                "port" | "mtu" | "timeout" | "max-body-size"
                                | "otel-max-body-size" | "otel-timeout" | "disable"
                                | "verify-certificate" => v
                                    .parse::<i64>()
                                    .map_or_else(|_| Value::from(v.clone()), Value::from),
                                _ => Value::from(v.clone()),
                            };
                            (k.clone(), v)
                        })
                        .collect(),
                )),
            }
        }
        ("POST", true) => {
            let id = id?;
            if servers.contains_key(&id) {
                return Some(fail(500, format!("Metric server '{id}' already exists")));
            }
            let f: BTreeMap<String, String> = call
                .params
                .iter()
                .filter(|(k, _)| k != "id" && !SENSITIVE.contains(&k.as_str()))
                .cloned()
                .collect();
            servers.insert(id, f);
            ok(Value::Null)
        }
        ("PUT", true) => {
            let id = id?;
            let Some(data) = servers.get_mut(&id) else {
                return Some(fail(500, format!("no such server '{id}'")));
            };
            let set: Vec<&(String, String)> = call
                .params
                .iter()
                .filter(|(k, _)| {
                    !["id", "digest", "delete"].contains(&k.as_str())
                        && !SENSITIVE.contains(&k.as_str())
                })
                .collect();
            let delete = call.delete_list();
            for k in &delete {
                if REQUIRED.contains(&k.as_str()) {
                    return Some(fail(500, format!("unable to delete required option '{k}'")));
                }
                if set.iter().any(|(s, _)| s == k) {
                    return Some(fail(
                        500,
                        format!("cannot set and delete property '{k}' at the same time!"),
                    ));
                }
            }
            for (k, v) in set {
                data.insert(k.clone(), v.clone());
            }
            for k in delete {
                data.remove(&k);
            }
            ok(Value::Null)
        }
        ("DELETE", true) => {
            let id = id?;
            if servers.remove(&id).is_none() {
                // `PVE::Status::Plugin->lookup($plugin_cfg->{type})` of an entry that is not
                // there: SectionConfig croaks, naming the caller's file and line.
                return Some(fail(
                    500,
                    "cannot lookup undefined type! at /usr/share/perl5/PVE/API2/Cluster/MetricServer.pm line 295.",
                ));
            }
            ok(Value::Null)
        }
        _ => return None,
    })
}
