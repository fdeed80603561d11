//! How a VM's live config is read and compared (S8): the wire map with the typed parts
//! declared sub-keys are overlaid on, both sides in one form, and what a recorded declaration
//! still holds (S19).

use super::*;

/// A guest's live config as it is compared: the wire map, the typed parts declared sub-keys
/// are overlaid on, the digest and the lock.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(super) map: BTreeMap<String, String>,
    pub(super) net: Indexed<Net, NetIndex>,
    pub(super) agent: Option<Agent>,
    pub(super) digest: String,
    pub(super) lock: Option<String>,
}

impl Live {
    pub(super) fn of(cfg: &VmConfigResponse) -> Live {
        let mut map = crate::kit::wire::wire_map(cfg);
        for k in ["digest", "lock"] {
            map.remove(k);
        }
        Live {
            map,
            net: cfg.net.clone(),
            agent: cfg.agent.clone(),
            digest: cfg.digest.clone(),
            lock: cfg.lock.as_ref().map(ToString::to_string),
        }
    }
}

/// Reads the guest's config: `None` only on the typed `QemuConfigNotFound` (S1).
pub(super) async fn read_at(
    client: &Client,
    node: &str,
    vmid: i64,
) -> Result<Option<Live>, Failure> {
    Ok(
        crate::kit::read::get(client, &VmConfig::new(node.to_owned(), vmid))
            .await?
            .map(|c| Live::of(&c)),
    )
}

/// The buses whose `<bus><n>` keys are disks here.
pub(super) const BUSES: &[&str] = &["scsi", "virtio", "sata", "ide"];

/// Whether `key` is a disk key (`scsi0`, `virtio1`, `sata2`, `ide0`...).
pub(super) fn is_disk_key(key: &str) -> bool {
    BUSES.iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// `declared` with its unset sub-keys filled from `live`.
pub(super) fn overlay_agent(declared: &Agent, live: &Agent) -> Agent {
    let mut a = declared.clone();
    a.freeze_fs = a.freeze_fs.or(live.freeze_fs);
    a.fstrim_cloned_disks = a.fstrim_cloned_disks.or(live.fstrim_cloned_disks);
    a.type_ = a.type_.or_else(|| live.type_.clone());
    for (k, v) in &live.other_keys {
        a.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    a
}

/// `declared` with its unset sub-keys filled from `live`.
pub(super) fn overlay_net(declared: &Net, live: &Net) -> Net {
    let mut n = declared.clone();
    n.bridge = n.bridge.or_else(|| live.bridge.clone());
    n.firewall = n.firewall.or(live.firewall);
    n.link_down = n.link_down.or(live.link_down);
    n.macaddr = n.macaddr.or_else(|| live.macaddr.clone());
    n.mtu = n.mtu.or(live.mtu);
    n.queues = n.queues.or(live.queues);
    n.rate = n.rate.or(live.rate);
    n.tag = n.tag.or(live.tag);
    n.trunks = n.trunks.or_else(|| live.trunks.clone());
    for (k, v) in &live.other_keys {
        n.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    n
}

/// Both sides in one form (S8): `tags` as a lower-case set (split on PVE's separators,
/// sorted, once each: pve-guest-common `src/PVE/GuestHelpers.pm` get_unique_tags under the
/// default tag style), `description` without trailing whitespace (older PVE releases read a
/// description back with a final newline; newer ones trim it), cloud-init settings in their
/// compared forms ([`cloudinit::normalise`]).
pub(super) fn normalised(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = crate::kit::wire::trim_end(map.clone(), &["description"]);
    if let Some(t) = out.get_mut("tags") {
        *t = guest::tags_form(t);
    }
    cloudinit::normalise(&mut out);
    out
}

pub(super) fn diff(
    declared: &BTreeMap<String, String>,
    live: &BTreeMap<String, String>,
) -> Vec<Change> {
    crate::kit::wire::differences(&normalised(declared), &normalised(live))
        .into_iter()
        .map(|(key, old, new)| Change { key, old, new })
        .collect()
}

/// The keys of a recorded declaration (wire form) that the live config no longer matches: a
/// network device on its recorded sub-keys, a volume on its meaning, rotation markers never.
pub(super) fn still_differs(last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
    let map = normalised(&live.map);
    let last_n = normalised(last);
    last_n
        .iter()
        .filter(|(k, v)| {
            let here = live.map.get(*k).map(String::as_str);
            if k.starts_with("rotate:") {
                return false;
            }
            if let Some(storage) = v.strip_suffix(":cloudinit") {
                return !here.is_some_and(|h| {
                    cloudinit::is_cloudinit_value(h)
                        && volume::storage_of(h).as_deref() == Some(storage)
                });
            }
            if k.as_str() == "efidisk0" || k.as_str() == "tpmstate0" {
                return StateDisk::from_create_value(v)
                    .is_none_or(|d| volume::compare_state(k, &d, here) != Ok(None));
            }
            if is_disk_key(k) {
                return Disk::from_create_value(v)
                    .is_none_or(|d| !volume::compare(k, &d, here).is_ok_and(|d| d.is_empty()));
            }
            if k.as_str() == "agent" {
                let Some((recorded, l)) = v.parse::<Agent>().ok().zip(live.agent.as_ref()) else {
                    return true;
                };
                return overlay_agent(&recorded, l).to_string() != l.to_string();
            }
            let net = Indexed::<Net, NetIndex>::index_of(k).and_then(|n| {
                let recorded = v.parse::<Net>().ok()?;
                let l = live.net.get(n)?;
                Some(overlay_net(&recorded, l).to_string() == l.to_string())
            });
            match net {
                Some(same) => !same,
                None => map.get(*k) != Some(*v),
            }
        })
        .map(|(k, _)| k.clone())
        .collect()
}
