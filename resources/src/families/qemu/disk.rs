//! A guest's disks, as the `Vm` family declares and compares them.
//!
//! A disk is declared by where it is and how big it is ([`Disk`]): PVE allocates it from
//! `STORAGE:SIZE_GIB` and prints it back as a volume with its size (`local-lvm:vm-100-disk-0,
//! size=32G`). So the two sides are compared on meaning, not text:
//!
//! - **S18 Never plan a replace.** A disk on another storage than declared, or of another size,
//!   is a refusal with a sentence: moving a disk and resizing it are not config changes, and a
//!   disk never shrinks. Nothing is deleted or recreated.
//! - **S7** Only the declared options are compared; an update sends the live volume with the
//!   declared options set and every other live option and its size kept.
//! - A declared disk that the guest does not have is added (PVE allocates it on the config
//!   write).

use std::collections::BTreeMap;

/// The buses whose `<bus><n>` keys are disks here.
pub(crate) const BUSES: &[&str] = &["scsi", "virtio", "sata"];

/// Whether `key` is a disk key (`scsi0`, `virtio1`, `sata2`...).
pub(crate) fn is_disk_key(key: &str) -> bool {
    BUSES.iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Bytes in a GiB.
const GIB: u64 = 1024 * 1024 * 1024;

/// A declared disk: its storage, its size in GiB, and the options that are managed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The storage it is allocated on, e.g. `local-lvm`.
    pub storage: String,
    /// Its size in GiB.
    pub size_gib: u64,
    /// Managed options (`iothread`, `discard`, `ssd`, `cache`...), as PVE writes them.
    pub options: BTreeMap<String, String>,
}

impl Disk {
    /// A disk of `size_gib` GiB on `storage`, without managed options.
    pub fn new(storage: impl Into<String>, size_gib: u64) -> Self {
        Disk {
            storage: storage.into(),
            size_gib,
            options: BTreeMap::new(),
        }
    }

    /// Manages option `key` with `value` (e.g. `iothread`, `1`).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }

    /// What a create sends, and what state records: `STORAGE:SIZE[,key=value...]`.
    pub fn create_value(&self) -> String {
        let mut out = format!("{}:{}", self.storage, self.size_gib);
        for (k, v) in &self.options {
            out.push_str(&format!(",{k}={v}"));
        }
        out
    }

    /// What is wrong with this declaration before anything is sent, if anything: no size, a
    /// size this side cannot count in bytes, or a storage or option that would break PVE's
    /// `STORAGE:SIZE,key=value` string.
    pub fn problem(&self) -> Option<String> {
        let breaks = |t: &str| t.is_empty() || t.contains([',', '=', ':', '\n']);
        if self.size_gib == 0 {
            return Some("a disk of 0 GiB".to_owned());
        }
        if self.size_gib.checked_mul(GIB).is_none() {
            return Some(format!("{} GiB is more than a disk can be", self.size_gib));
        }
        if breaks(&self.storage) {
            return Some(format!("storage {:?} is not a storage id", self.storage));
        }
        self.options
            .iter()
            .find(|(k, v)| breaks(k) || v.is_empty() || v.contains([',', '\n']))
            .map(|(k, v)| format!("option {k:?}={v:?} cannot be written in a disk's string"))
    }

    /// Reads back a [`Disk::create_value`] (from state).
    pub fn from_create_value(text: &str) -> Option<Disk> {
        let mut parts = text.split(',');
        let (storage, size) = parts.next()?.split_once(':')?;
        let mut disk = Disk::new(storage, size.parse().ok()?);
        for p in parts {
            let (k, v) = p.split_once('=')?;
            disk.options.insert(k.to_owned(), v.to_owned());
        }
        Some(disk)
    }
}

/// A disk as PVE prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Live {
    volume: String,
    options: Vec<(String, String)>,
    size_bytes: Option<u64>,
    size_text: String,
}

fn parse_size(text: &str) -> Option<u64> {
    let (num, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit() && c != '.')?);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit {
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

fn parse_live(text: &str) -> Option<Live> {
    let mut parts = text.split(',');
    let first = parts.next()?;
    let volume = first.strip_prefix("file=").unwrap_or(first).to_owned();
    let mut options = Vec::new();
    let mut size_bytes = None;
    let mut size_text = String::new();
    for p in parts.filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=')?;
        if k == "size" {
            size_bytes = Some(parse_size(v)?);
            v.clone_into(&mut size_text);
        } else {
            options.push((k.to_owned(), v.to_owned()));
        }
    }
    Some(Live {
        volume,
        options,
        size_bytes,
        size_text,
    })
}

/// What a declared disk needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DiskDiff {
    /// The live disk matches.
    Same,
    /// Write this value (a new disk, or the live volume with the declared options and its
    /// size).
    Write(String),
    /// The difference cannot be made by a config write; the sentence says why (S18).
    Refuse(String),
}

/// Compares a declared disk with the live value of its key (if any).
pub(crate) fn compare(key: &str, declared: &Disk, live: Option<&str>) -> DiskDiff {
    let Some(text) = live else {
        return DiskDiff::Write(declared.create_value());
    };
    let Some(l) = parse_live(text) else {
        return DiskDiff::Refuse(format!("{key} is {text:?}, which cannot be read as a disk"));
    };
    let storage = l.volume.split(':').next().unwrap_or_default();
    if storage != declared.storage {
        return DiskDiff::Refuse(format!(
            "{key} is on storage {storage}, declared on {}: moving a disk is not a config change, and it is never replaced (S18)",
            declared.storage
        ));
    }
    let Some(want) = declared.size_gib.checked_mul(GIB) else {
        return DiskDiff::Refuse(format!(
            "{key}: {} GiB is more than a disk can be",
            declared.size_gib
        ));
    };
    match l.size_bytes {
        None => {
            return DiskDiff::Refuse(format!(
                "{key} ({text}) has no size; refusing to guess what it is"
            ))
        }
        Some(have) if have > want => {
            return DiskDiff::Refuse(format!(
                "{key} is {} GiB, declared {} GiB: a disk never shrinks (S18)",
                have as f64 / (1024.0 * 1024.0 * 1024.0),
                declared.size_gib
            ))
        }
        Some(have) if have < want => {
            return DiskDiff::Refuse(format!(
                "{key} is {} GiB, declared {} GiB: growing a disk is a resize, not a config change; resize it and plan again",
                have as f64 / (1024.0 * 1024.0 * 1024.0),
                declared.size_gib
            ))
        }
        Some(_) => {}
    }
    let differs = declared
        .options
        .iter()
        .any(|(k, v)| !l.options.iter().any(|(lk, lv)| lk == k && lv == v));
    if !differs {
        return DiskDiff::Same;
    }
    let mut options = l.options.clone();
    for (k, v) in &declared.options {
        match options.iter_mut().find(|(lk, _)| lk == k) {
            Some(slot) => slot.1.clone_from(v),
            None => options.push((k.clone(), v.clone())),
        }
    }
    // The same volume, every option, and the size as PVE printed it (as PVE's own editor
    // sends it back).
    let mut out = l.volume;
    for (k, v) in options {
        out.push_str(&format!(",{k}={v}"));
    }
    out.push_str(&format!(",size={}", l.size_text));
    DiskDiff::Write(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s18_storage_and_size_changes_are_refused_options_are_written() {
        let d = Disk::new("local-lvm", 32).option("iothread", "1");
        assert_eq!(d.create_value(), "local-lvm:32,iothread=1");
        assert_eq!(Disk::from_create_value(&d.create_value()), Some(d.clone()));
        let live = "local-lvm:vm-100-disk-0,iothread=1,size=32G";
        assert_eq!(compare("scsi0", &d, Some(live)), DiskDiff::Same);
        assert_eq!(
            compare("scsi0", &d, None),
            DiskDiff::Write("local-lvm:32,iothread=1".into())
        );
        assert_eq!(
            compare(
                "scsi0",
                &d,
                Some("local-lvm:vm-100-disk-0,discard=on,size=32768M")
            ),
            DiskDiff::Write("local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32768M".into())
        );
        for (live, says) in [
            ("ceph:vm-100-disk-0,size=32G", "moving a disk"),
            (
                "local-lvm:vm-100-disk-0,iothread=1,size=64G",
                "never shrinks",
            ),
            ("local-lvm:vm-100-disk-0,iothread=1,size=16G", "is a resize"),
            ("local-lvm:vm-100-disk-0,iothread=1", "has no size"),
        ] {
            match compare("scsi0", &d, Some(live)) {
                DiskDiff::Refuse(why) => assert!(why.contains(says), "{why}"),
                other => panic!("{live}: {other:?}"),
            }
        }
        assert!(is_disk_key("virtio12") && !is_disk_key("scsihw") && !is_disk_key("net0"));
        let huge = Disk::new("local-lvm", 1 << 40);
        assert_eq!(
            huge.problem().as_deref(),
            Some("1099511627776 GiB is more than a disk can be")
        );
        assert!(matches!(
            compare("scsi0", &huge, Some(live)),
            DiskDiff::Refuse(_)
        ));
        assert!(Disk::new("local-lvm", 0).problem().is_some());
        assert!(Disk::new("local:lvm", 8).problem().is_some());
        assert!(Disk::new("local-lvm", 8)
            .option("cache", "a,b")
            .problem()
            .is_some());
        assert_eq!(d.problem(), None);
    }
}
