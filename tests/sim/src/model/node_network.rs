//! A node's network: its interfaces, staged and running, as pve-manager
//! `PVE/API2/Network.pm` and pve-common `src/PVE/Network/Interfaces.pm` answer them, and the
//! apply's reload.

use serde_json::{json, Value};

use crate::api::{ok, param_error, Answer, Call};
use crate::state::Cluster;

pub(crate) const NO_IFACE: &str = "interface does not exist";

/// One interface as pve-common `src/PVE/Network/Interfaces.pm` __read_etc_network_interfaces
/// gives it: `active` only for an interface that is up (the running file's here), `exists` for
/// a physical NIC, `method` and `method6` `manual` and `families` `[inet]` unless the file says
/// otherwise, and `priority`, the stanza's place in the file as written
/// ([`crate::state::renumber`]).
pub(crate) fn iface_json(name: &str, keys: &crate::state::Iface, active: bool) -> Value {
    let v6 = keys.contains_key("cidr6") || keys.contains_key("address6");
    let families = if v6 {
        json!(["inet", "inet6"])
    } else {
        json!(["inet"])
    };
    let mut v = json!({"iface": name, "method": "manual", "method6": "manual",
        "families": families});
    if active {
        v["active"] = json!(1);
    }
    for (k, val) in keys {
        let is_bool = ["autostart", "bridge_vlan_aware"].contains(&k.as_str());
        v[k] = if is_bool {
            Value::from(u8::from(val == "1"))
        } else if k == "priority" {
            val.parse::<u64>()
                .map_or_else(|_| Value::from(val.clone()), Value::from)
        } else {
            Value::from(val.clone())
        };
    }
    match keys.get("type").map(String::as_str) {
        Some("eth") => v["exists"] = json!(1),
        // A bridge without STP settings: `bridge_stp off`, then `bridge_fd 0`.
        Some("bridge") => {
            if !keys.contains_key("bridge_stp") {
                v["bridge_stp"] = json!("off");
            }
            if !keys.contains_key("bridge_fd") && v["bridge_stp"] == "off" {
                v["bridge_fd"] = json!(0);
            }
        }
        _ => {}
    }
    // The file holds `address CIDR` (what a `cidr` parameter writes); reading it back maps it
    // to `address`, `netmask` and `cidr` (and the same for IPv6).
    for (addr, mask, cidr, bits) in [
        ("address", "netmask", "cidr", 32),
        ("address6", "netmask6", "cidr6", 128),
    ] {
        let given = keys.get(addr).or(keys.get(cidr)).cloned();
        let Some(given) = given else { continue };
        let (base, prefix) = match given.split_once('/') {
            Some((b, p)) => (b.to_owned(), Some(p.to_owned())),
            None => (given.clone(), keys.get(mask).cloned()),
        };
        v[addr] = json!(base);
        match prefix {
            Some(p) => {
                v[mask] = json!(p);
                v[cidr] = json!(format!("{base}/{p}"));
            }
            None => v[cidr] = json!(format!("{base}/{bits}")),
        }
    }
    v
}

pub(crate) fn network_list(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let Some(net) = cluster.networks.get(call.node()) else {
        return ok(json!([]));
    };
    let wanted = call.get("type");
    // pve-manager `PVE/API2/Network.pm` index: `delete $ifaces->{lo}`.
    let rows = net
        .view()
        .iter()
        .filter(|(name, _)| name.as_str() != "lo")
        .filter(|(_, keys)| match wanted {
            None => true,
            Some("any_bridge") => keys
                .get("type")
                .is_some_and(|t| t == "bridge" || t == "OVSBridge"),
            Some(t) => keys.get("type").is_some_and(|have| have == t),
        })
        .map(|(name, keys)| iface_json(name, keys, net.running.contains_key(name)))
        .collect();
    let extra = match net.changes() {
        Some(diff) => vec![("changes", Value::from(diff))],
        None => Vec::new(),
    };
    Answer::Data(Value::Array(rows), extra)
}

pub(crate) fn network_read(cluster: &Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default();
    match cluster
        .networks
        .get(call.node())
        .and_then(|n| n.view().get(iface).map(|k| (n, k)))
    {
        // The interface's hash as read: without `iface`, which only the list's hash_to_array adds.
        Some((net, keys)) => {
            let mut v = iface_json(iface, keys, net.running.contains_key(iface));
            if let Some(m) = v.as_object_mut() {
                m.remove("iface");
            }
            ok(v)
        }
        None => param_error("iface", NO_IFACE),
    }
}

/// Interface keys of a request: everything but the node, the name and `delete`/`digest`.
/// Comments are kept as PVE reads them back from the interfaces file: one `#` line each, so
/// every line ends with a newline.
pub(crate) fn iface_keys(call: &Call<'_>) -> Vec<(String, String)> {
    call.params
        .iter()
        .filter(|(k, _)| !["node", "iface", "delete", "digest"].contains(&k.as_str()))
        .map(|(k, v)| {
            if k == "comments" || k == "comments6" {
                let text: String = v.lines().map(|l| format!("{}\n", l.trim_end())).collect();
                (k.clone(), text)
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect()
}

/// pve-manager `PVE/API2/Network.pm` create_network and update_network: `method` and `method6`
/// come from the request alone (`static` when it carries an address, else `manual`), and an
/// update without an IPv6 address leaves `inet6` out of `families`, so the writer drops that
/// stanza and its keys.
pub(crate) fn recompute_methods(
    keys: &mut crate::state::Iface,
    request: &[(String, String)],
    update: bool,
) {
    let sent = |names: &[&str]| request.iter().any(|(k, _)| names.contains(&k.as_str()));
    let v4 = sent(&["cidr", "address"]);
    let v6 = sent(&["cidr6", "address6"]);
    keys.insert("method".into(), if v4 { "static" } else { "manual" }.into());
    keys.insert(
        "method6".into(),
        if v6 { "static" } else { "manual" }.into(),
    );
    if update && !v6 {
        for k in ["cidr6", "address6", "netmask6", "gateway6"] {
            keys.remove(k);
        }
    }
}

/// pve-manager `PVE/API2/Network.pm` `$map_cidr_to_address_netmask`: a request may give an
/// address as `cidr` or as `address` (and `netmask`), not both.
pub(crate) fn address_conflict(call: &Call<'_>) -> Option<Answer> {
    for (cidr, addr, mask) in [
        ("cidr", "address", "netmask"),
        ("cidr6", "address6", "netmask6"),
    ] {
        if call.get(cidr).is_some_and(|c| !c.is_empty()) {
            for k in [addr, mask] {
                if call.get(k).is_some_and(|v| !v.is_empty()) {
                    return Some(param_error(k, format!("{k} conflicts with {cidr}")));
                }
            }
        }
    }
    None
}

/// The file holds one address per family: what a request gives, as `cidr` or as
/// `address`/`netmask`, replaces the other form.
pub(crate) fn replace_address_forms(keys: &mut crate::state::Iface, request: &[(String, String)]) {
    let sent = |k: &str| request.iter().any(|(n, _)| n == k);
    for (cidr, addr, mask) in [
        ("cidr", "address", "netmask"),
        ("cidr6", "address6", "netmask6"),
    ] {
        if sent(cidr) {
            keys.remove(addr);
            keys.remove(mask);
        } else if sent(addr) || sent(mask) {
            keys.remove(cidr);
        }
    }
}

pub(crate) fn network_create(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if net.view().contains_key(&iface) {
        return param_error("iface", "interface already exists");
    }
    if let Some(conflict) = address_conflict(call) {
        return conflict;
    }
    let mut keys = iface_keys(call).into_iter().collect();
    recompute_methods(&mut keys, call.params, false);
    let staged = net.staged_mut();
    staged.insert(iface, keys);
    crate::state::renumber(staged);
    ok(Value::Null)
}

pub(crate) fn network_update(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if !net.view().contains_key(&iface) {
        return param_error("iface", NO_IFACE);
    }
    if let Some(conflict) = address_conflict(call) {
        return conflict;
    }
    let set = iface_keys(call);
    let deletes = call.delete_list();
    let staged = net.staged_mut();
    if let Some(keys) = staged.get_mut(&iface) {
        for k in deletes {
            // update_network: deleting `cidr` deletes the address and netmask it stands for.
            let also: &[&str] = match k.as_str() {
                "cidr" => &["address", "netmask"],
                "cidr6" => &["address6", "netmask6"],
                _ => &[],
            };
            for a in also {
                keys.remove(*a);
            }
            keys.remove(&k);
        }
        replace_address_forms(keys, call.params);
        for (k, v) in set {
            keys.insert(k, v);
        }
        recompute_methods(keys, call.params, true);
    }
    crate::state::renumber(staged);
    ok(Value::Null)
}

pub(crate) fn network_delete(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let iface = call.get("iface").unwrap_or_default().to_owned();
    // A node without an interfaces file reads as an empty one (INotify's reader), never an
    // error.
    let net = cluster.networks.entry(call.node().to_owned()).or_default();
    if !net.view().contains_key(&iface) {
        return param_error("iface", NO_IFACE);
    }
    let staged = net.staged_mut();
    staged.remove(&iface);
    crate::state::renumber(staged);
    ok(Value::Null)
}

/// `PUT /nodes/{node}/network`: pve-manager `PVE/API2/Network.pm` reload_network_config, a
/// `srvreload` task that promotes the staged file first (`rename($new_config_file, ...)`) and
/// reloads second, and runs even when nothing is staged. A failing reload ends the task with
/// `NodeNetwork::reload_fails` (PVE's run_command says "command 'ifreload -a' failed: exit code
/// N").
pub(crate) fn network_apply(cluster: &mut Cluster, call: &Call<'_>) -> Answer {
    let node = call.node().to_owned();
    let upid = cluster.start_task(
        &node.clone(),
        "srvreload",
        "networking",
        call.credential,
        move |c| {
            let net = c.networks.entry(node.clone()).or_default();
            if let Some(staged) = net.staged.take() {
                net.running = staged;
            }
            match net.reload_fails.take() {
                Some(e) => Err(e),
                // `run_command(['ifreload', '-a'], errfunc => ...)`: ifreload prints nothing when
                // it succeeds, and run_command does not log the command.
                None => Ok(Vec::new()),
            }
        },
    );
    ok(Value::from(upid))
}
