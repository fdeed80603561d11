//! Cloud-init on a VM: the drive PVE generates the guest's seed on, and the settings compared
//! in one form on both sides (S8).
//!
//! - `sshkeys` travels URL-encoded (qemu-server `src/PVE/API2/Qemu.pm` create_vm and
//!   update_vm_api `uri_unescape` it before `validate_ssh_public_keys`; the config keeps the
//!   encoded text): it is declared as plain text, sent encoded, and compared decoded, line by
//!   line.
//! - `ipconfigN` is a property string (`ip=...,gw=...`) compared as its set of pairs, with the
//!   keys PVE's `pve-qm-ipconfig` format has; any other key is refused before any write.
//! - `nameserver` and `searchdomain` are lists kept in their order; PVE takes spaces, commas or
//!   semicolons between items.
//! - The settings need a cloud-init drive: declared ([`CloudInitDrive`]), or already on the
//!   guest (or on the template a clone comes from); else they are refused with a sentence.

use std::collections::BTreeMap;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// The cloud-init drive: its key (`ide2`, `scsi1`, `sata0`) and the storage PVE makes its
/// volume on (`STORAGE:cloudinit` at create, read back as `STORAGE:vm-VMID-cloudinit`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloudInitDrive {
    /// The drive key.
    pub key: String,
    /// The storage.
    pub storage: String,
}

impl CloudInitDrive {
    /// A cloud-init drive on `key`, made on `storage`.
    pub fn new(key: impl Into<String>, storage: impl Into<String>) -> Self {
        CloudInitDrive {
            key: key.into(),
            storage: storage.into(),
        }
    }

    /// What a create or config write sends and state records.
    pub(crate) fn create_value(&self) -> String {
        format!("{}:cloudinit", self.storage)
    }
}

/// The buses a cloud-init drive may be on.
const BUSES: &[&str] = &["ide", "sata", "scsi"];

/// The cloud-init settings a declaration may carry (their wire keys, `ipconfigN` apart).
pub(crate) const SETTINGS: &[&str] = &["ciuser", "nameserver", "searchdomain", "sshkeys"];

/// The keys of PVE's `pve-qm-ipconfig` format (qemu-server `src/PVE/QemuServer.pm`).
const IPCONFIG_KEYS: &[&str] = &["ip", "gw", "ip6", "gw6"];

/// What `encodeURIComponent` leaves as it is (and URI::Escape's `uri_escape` too): letters,
/// digits and `-_.!~*'()`. The schema's `urlencoded` format takes exactly these and `%XX`.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// SSH keys as the API takes them: URL-encoded.
pub(crate) fn encode_keys(text: &str) -> String {
    utf8_percent_encode(text, KEPT).to_string()
}

/// SSH keys in the one form both sides are compared in: decoded, each line trimmed, blank lines
/// dropped. Text that does not decode to UTF-8 is kept as it is (and so differs).
fn keys_form(text: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map_or_else(|_| text.to_owned(), |d| d.into_owned());
    decoded
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A list PVE splits on spaces, commas and semicolons, in its order, space-separated.
fn list_form(text: &str) -> String {
    text.split([' ', ',', ';'])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An `ipconfigN` value's pairs, sorted by key.
fn ipconfig_form(text: &str) -> String {
    let mut pairs: Vec<&str> = text.split(',').filter(|p| !p.is_empty()).collect();
    pairs.sort_unstable_by_key(|p| p.split_once('=').unwrap_or((p, "")));
    pairs.join(",")
}

/// Whether `key` is an `ipconfigN` key.
pub(crate) fn is_ipconfig(key: &str) -> bool {
    key.strip_prefix("ipconfig")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Puts the cloud-init settings of a wire map in their compared form (S8).
pub(crate) fn normalise(map: &mut BTreeMap<String, String>) {
    for (k, v) in map.iter_mut() {
        match k.as_str() {
            "sshkeys" => *v = keys_form(v),
            "nameserver" | "searchdomain" => *v = list_form(v),
            k if is_ipconfig(k) => *v = ipconfig_form(v),
            _ => {}
        }
    }
}

/// The keys of the declared `ipconfigN` values that PVE's format does not know.
pub(crate) fn unknown_ipconfig_keys(key: &str, value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let k = p.split_once('=').map_or(p, |(k, _)| k);
            (!IPCONFIG_KEYS.contains(&k)).then(|| format!("{key}: {k}"))
        })
        .collect()
}

/// Whether a live drive value is a cloud-init volume (qemu-server `src/PVE/QemuServer/Drive.pm`
/// drive_is_cloudinit: the volume name is `cloudinit` or `vm-N-cloudinit`, with a format
/// suffix on file storages).
pub(crate) fn is_cloudinit_value(value: &str) -> bool {
    let volume = value.split(',').next().unwrap_or_default();
    let volume = volume.strip_prefix("file=").unwrap_or(volume);
    let name = volume.rsplit([':', '/']).next().unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    stem == "cloudinit"
        || stem
            .strip_prefix("vm-")
            .and_then(|r| r.strip_suffix("-cloudinit"))
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// The key of the cloud-init drive among `live`'s drives, if it has one.
pub(crate) fn live_drive(live: &BTreeMap<String, String>) -> Option<&str> {
    live.iter()
        .filter(|(k, _)| BUSES.iter().any(|b| k.starts_with(b)))
        .find(|(_, v)| is_cloudinit_value(v))
        .map(|(k, _)| k.as_str())
}

/// What a declared cloud-init drive needs against `live`: `Ok(Some(value))` a config write
/// that adds it, `Ok(None)` nothing; `Err` the sentence when it is elsewhere or on another
/// storage (S18).
pub(crate) fn compare_drive(
    declared: &CloudInitDrive,
    live: &BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    if !BUSES.iter().any(|b| {
        declared
            .key
            .strip_prefix(b)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|d| d.is_ascii_digit()))
    }) {
        return Err(format!(
            "the cloud-init drive is declared on {}, which is not an IDE, SATA or SCSI drive key",
            declared.key
        ));
    }
    match live_drive(live) {
        Some(k) if k != declared.key => Err(format!(
            "the cloud-init drive is {k}, declared {}: PVE allows one, and a drive is never moved by a plan (S18)",
            declared.key
        )),
        Some(k) => {
            let storage = crate::kit::volume::storage_of(&live[k]).unwrap_or_default();
            if storage == declared.storage {
                Ok(None)
            } else {
                Err(format!(
                    "the cloud-init drive {k} is on storage {storage}, declared on {}: it is never moved by a plan (S18)",
                    declared.storage
                ))
            }
        }
        None => match live.get(&declared.key) {
            Some(other) => Err(format!(
                "{} is {other:?}, not a cloud-init drive; it is never replaced (S18)",
                declared.key
            )),
            None => Ok(Some(declared.create_value())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s08_ssh_keys_are_sent_encoded_and_compared_decoded() {
        let keys = "ssh-ed25519 AAAAC3Nz alice@host\nssh-rsa AAAAB3 bob";
        let wire = encode_keys(keys);
        assert_eq!(
            wire,
            "ssh-ed25519%20AAAAC3Nz%20alice%40host%0Assh-rsa%20AAAAB3%20bob"
        );
        assert_eq!(keys_form(&wire), keys_form(keys));
        // PVE's GUI encodes the same way; a trailing newline and blank lines do not differ.
        assert_eq!(keys_form(&format!("{wire}%0A%0A")), keys_form(keys));
        assert_ne!(keys_form(&encode_keys("ssh-rsa OTHER")), keys_form(keys));
        assert_eq!(
            list_form("1.1.1.1, 8.8.8.8;9.9.9.9"),
            "1.1.1.1 8.8.8.8 9.9.9.9"
        );
        assert_eq!(
            ipconfig_form("ip=dhcp,gw6=fe80::1,ip6=auto"),
            "gw6=fe80::1,ip=dhcp,ip6=auto"
        );
        assert_eq!(
            unknown_ipconfig_keys("ipconfig0", "ip=dhcp,mtu=9000"),
            vec!["ipconfig0: mtu".to_owned()]
        );
    }

    #[test]
    fn s18_the_cloud_init_drive_is_added_never_moved() {
        assert!(is_cloudinit_value("local-lvm:vm-100-cloudinit,media=cdrom"));
        assert!(is_cloudinit_value(
            "local:100/vm-100-cloudinit.qcow2,media=cdrom"
        ));
        assert!(!is_cloudinit_value("local:iso/debian.iso,media=cdrom"));
        let d = CloudInitDrive::new("ide2", "local-lvm");
        let live = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            compare_drive(&d, &live(&[])),
            Ok(Some("local-lvm:cloudinit".into()))
        );
        assert_eq!(
            compare_drive(
                &d,
                &live(&[("ide2", "local-lvm:vm-100-cloudinit,media=cdrom")])
            ),
            Ok(None)
        );
        for (pairs, says) in [
            (
                vec![("ide0", "local-lvm:vm-100-cloudinit,media=cdrom")],
                "is ide0",
            ),
            (
                vec![("ide2", "ceph:vm-100-cloudinit,media=cdrom")],
                "storage ceph",
            ),
            (
                vec![("ide2", "local:iso/debian.iso,media=cdrom")],
                "not a cloud-init",
            ),
        ] {
            let why = compare_drive(&d, &live(&pairs)).expect_err("refused");
            assert!(why.contains(says), "{why}");
        }
        assert!(compare_drive(&CloudInitDrive::new("virtio1", "x"), &live(&[])).is_err());
    }
}
