//! How a container's live config is read and compared (S8): the wire map with the typed
//! parts declared sub-keys are overlaid on, both sides in one form, and what a recorded
//! declaration still holds (S19).

use super::*;

/// A container's live config as it is compared.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(super) map: BTreeMap<String, String>,
    pub(super) net: Indexed<Net, NetIndex>,
    pub(super) features: Option<Features>,
    pub(super) unprivileged: bool,
    pub(super) digest: String,
    pub(super) lock: Option<String>,
}

impl Live {
    pub(super) fn of(cfg: &ContainerConfigResponse) -> Live {
        let mut map = crate::kit::wire::wire_map(cfg);
        for k in ["digest", "lock"] {
            map.remove(k);
        }
        Live {
            map,
            net: cfg.net.clone(),
            features: cfg.features.clone(),
            unprivileged: cfg.unprivileged == Some(true),
            digest: cfg.digest.clone().unwrap_or_default(),
            lock: cfg.lock.as_ref().map(ToString::to_string),
        }
    }
}

/// `declared` with its unset sub-keys filled from `live`.
pub(super) fn overlay_net(declared: &Net, live: &Net) -> Net {
    let mut n = declared.clone();
    n.bridge = n.bridge.or_else(|| live.bridge.clone());
    n.firewall = n.firewall.or(live.firewall);
    n.gw = n.gw.or_else(|| live.gw.clone());
    n.gw6 = n.gw6.or_else(|| live.gw6.clone());
    n.host_managed = n.host_managed.or(live.host_managed);
    n.hwaddr = n.hwaddr.or_else(|| live.hwaddr.clone());
    n.ip = n.ip.or_else(|| live.ip.clone());
    n.ip6 = n.ip6.or_else(|| live.ip6.clone());
    n.link_down = n.link_down.or(live.link_down);
    n.mtu = n.mtu.or(live.mtu);
    n.rate = n.rate.or(live.rate);
    n.tag = n.tag.or(live.tag);
    n.trunks = n.trunks.or_else(|| live.trunks.clone());
    n.type_ = n.type_.or_else(|| live.type_.clone());
    for (k, v) in &live.other_keys {
        n.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    n
}

/// `declared` with its unset flags filled from `live`.
pub(super) fn overlay_features(declared: &Features, live: &Features) -> Features {
    let mut f = declared.clone();
    f.force_rw_sys = f.force_rw_sys.or(live.force_rw_sys);
    f.fuse = f.fuse.or(live.fuse);
    f.keyctl = f.keyctl.or(live.keyctl);
    f.mknod = f.mknod.or(live.mknod);
    f.mount = f.mount.or_else(|| live.mount.clone());
    f.nesting = f.nesting.or(live.nesting);
    for (k, v) in &live.other_keys {
        f.other_keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    f
}

/// A property string's pairs (`key=value`), for comparing flags one by one.
pub(super) fn pairs(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Both sides in one form (S8).
pub(super) fn normalised(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = crate::kit::wire::trim_end(map.clone(), &["description"]);
    if let Some(t) = out.get_mut("tags") {
        *t = guest::tags_form(t);
    }
    out
}

pub(super) async fn read_at(
    client: &Client,
    node: &str,
    vmid: i64,
) -> Result<Option<Live>, Failure> {
    Ok(
        crate::kit::read::get(client, &ContainerConfig::new(node.to_owned(), vmid))
            .await?
            .map(|c| Live::of(&c)),
    )
}

/// The keys of a recorded declaration that the live config no longer matches: a network
/// device and the features on their recorded sub-keys, a volume on its meaning.
pub(super) fn still_differs(last: &BTreeMap<String, String>, live: &Live) -> Vec<String> {
    let map = normalised(&live.map);
    normalised(last)
        .iter()
        .filter(|(k, v)| {
            let here = live.map.get(*k).map(String::as_str);
            if k.as_str() == "rootfs" || Indexed::<Mp, MpIndex>::index_of(k).is_some() {
                return Disk::from_create_value(v)
                    .is_none_or(|d| !volume::compare(k, &d, here).is_ok_and(|d| d.is_empty()));
            }
            if let Some(n) = Indexed::<Net, NetIndex>::index_of(k) {
                let same = v
                    .parse::<Net>()
                    .ok()
                    .zip(live.net.get(n))
                    .is_some_and(|(r, l)| overlay_net(&r, l).to_string() == l.to_string());
                return !same;
            }
            if k.as_str() == "features" {
                let same = v
                    .parse::<Features>()
                    .ok()
                    .zip(live.features.as_ref())
                    .is_some_and(|(r, l)| overlay_features(&r, l).to_string() == l.to_string());
                return !same;
            }
            map.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
}
