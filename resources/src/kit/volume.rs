//! A guest's volumes (a VM's disks, a container's root and mount points), as families declare
//! and compare them, and how one grows.
//!
//! A volume is declared by where it is and how big it is ([`Disk`]): PVE allocates it from
//! `STORAGE:SIZE_GIB` and prints it back as a volume with its size (`local-lvm:vm-100-disk-0,
//! size=32G`). So the two sides are compared on meaning, not text:
//!
//! - **S18 Never plan a replace.** A volume on another storage than declared is a refusal with
//!   a sentence (moving is not a config change), and so is one larger than declared (a volume
//!   never shrinks). Nothing is deleted or recreated.
//! - A volume smaller than declared grows to the declared size by PVE's resize task,
//!   never by a config write.
//! - **S7** Only the declared options are compared; a config write sends the live volume with
//!   the declared options set and every other live option and its size kept.
//! - A declared volume the guest does not have is added (PVE allocates it on the config write).
//!
//! EFI vars and TPM state volumes ([`StateDisk`]) have the size their kind fixes: they are
//! compared on storage and options only.

use std::collections::BTreeMap;
use std::future::Future;

use pve_sdk::{Operation, Upid};

use crate::contract::{Change, Cx, ErrorKind, Failure, ObjectRef, OnStarted};
use crate::kit::guest::flow::Guest;
use crate::kit::guest::GuestError;

/// Bytes in a GiB.
const GIB: u64 = 1024 * 1024 * 1024;

/// A declared volume: its storage, its size in GiB, and the options that are managed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The storage it is allocated on, e.g. `local-lvm`.
    pub storage: String,
    /// Its size in GiB.
    pub size_gib: u64,
    /// Managed options (`iothread`, `discard`, `ssd`, `cache`; a container mount point's `mp`,
    /// `backup`, `acl`...), as PVE writes them.
    pub options: BTreeMap<String, String>,
}

impl Disk {
    /// A volume of `size_gib` GiB on `storage`, without managed options.
    pub fn new(storage: impl Into<String>, size_gib: u64) -> Self {
        Disk {
            storage: storage.into(),
            size_gib,
            options: BTreeMap::new(),
        }
    }

    /// A container mount point: a volume of `size_gib` GiB on `storage`, mounted at `path`
    /// (its `mp` option).
    pub fn mount(storage: impl Into<String>, size_gib: u64, path: impl Into<String>) -> Self {
        Disk::new(storage, size_gib).option("mp", path)
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
        if self.size_gib == 0 {
            return Some("a disk of 0 GiB".to_owned());
        }
        if self.size_gib.checked_mul(GIB).is_none() {
            return Some(format!("{} GiB is more than a disk can be", self.size_gib));
        }
        text_problem(&self.storage, &self.options)
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

/// A volume whose size its kind fixes (a VM's EFI vars `efidisk0`, its TPM state `tpmstate0`):
/// declared by storage and managed options (`efitype`, `pre-enrolled-keys`, `version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDisk {
    /// The storage it is allocated on.
    pub storage: String,
    /// Managed options, as PVE writes them.
    pub options: BTreeMap<String, String>,
}

impl StateDisk {
    /// A state volume on `storage`, without managed options.
    pub fn new(storage: impl Into<String>) -> Self {
        StateDisk {
            storage: storage.into(),
            options: BTreeMap::new(),
        }
    }

    /// Manages option `key` with `value` (e.g. `efitype`, `4m`).
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }

    /// What a create sends and state records: `STORAGE:1[,key=value...]`. PVE wants a size in
    /// the new-volume form and ignores it for these kinds (qemu-server `src/PVE/API2/Qemu.pm`
    /// create_disks: `create_efidisk` sizes from the firmware's vars file, a TPM state takes
    /// `TPMSTATE_DISK_SIZE`).
    pub fn create_value(&self) -> String {
        let mut out = format!("{}:1", self.storage);
        for (k, v) in &self.options {
            out.push_str(&format!(",{k}={v}"));
        }
        out
    }

    /// What is wrong with this declaration before anything is sent, if anything.
    pub fn problem(&self) -> Option<String> {
        text_problem(&self.storage, &self.options)
    }

    /// Reads back a [`StateDisk::create_value`] (from state).
    pub fn from_create_value(text: &str) -> Option<StateDisk> {
        let d = Disk::from_create_value(text)?;
        Some(StateDisk {
            storage: d.storage,
            options: d.options,
        })
    }
}

/// A storage or option that would break PVE's `STORAGE:SIZE,key=value` string.
fn text_problem(storage: &str, options: &BTreeMap<String, String>) -> Option<String> {
    let breaks = |t: &str| t.is_empty() || t.contains([',', '=', ':', '\n']);
    if breaks(storage) {
        return Some(format!("storage {storage:?} is not a storage id"));
    }
    options
        .iter()
        .find(|(k, v)| breaks(k) || v.is_empty() || v.contains([',', '\n']))
        .map(|(k, v)| format!("option {k:?}={v:?} cannot be written in a disk's string"))
}

/// A volume as PVE prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Live {
    volume: String,
    options: Vec<(String, String)>,
    size_bytes: Option<u64>,
    size_text: String,
}

impl Live {
    fn storage(&self) -> &str {
        self.volume.split(':').next().unwrap_or_default()
    }
}

/// A size as PVE prints it (`32G`, `512M`, `1.5T`, bare bytes) in bytes.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let at = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(at);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit {
        "" => 1.0,
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
    let volume = first
        .strip_prefix("file=")
        .or_else(|| first.strip_prefix("volume="))
        .unwrap_or(first)
        .to_owned();
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

/// The storage a live volume value is on, if it parses.
pub(crate) fn storage_of(text: &str) -> Option<String> {
    parse_live(text).map(|l| l.storage().to_owned())
}

/// What a declared volume needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VolumeDiff {
    /// A config write of this value: a new volume, or the live one with the declared options
    /// and its live size.
    pub write: Option<String>,
    /// Growth by PVE's resize: the live size as printed, and the declared size in GiB.
    pub grow: Option<(String, u64)>,
}

impl VolumeDiff {
    /// Whether nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.write.is_none() && self.grow.is_none()
    }
}

/// The live value with `declared` options set, every other live option and the size kept (as
/// PVE's own editor sends it back).
fn with_options(l: &Live, declared: &BTreeMap<String, String>) -> Option<String> {
    let differs = declared
        .iter()
        .any(|(k, v)| !l.options.iter().any(|(lk, lv)| lk == k && lv == v));
    if !differs {
        return None;
    }
    let mut options = l.options.clone();
    for (k, v) in declared {
        match options.iter_mut().find(|(lk, _)| lk == k) {
            Some(slot) => slot.1.clone_from(v),
            None => options.push((k.clone(), v.clone())),
        }
    }
    let mut out = l.volume.clone();
    for (k, v) in options {
        out.push_str(&format!(",{k}={v}"));
    }
    if !l.size_text.is_empty() {
        out.push_str(&format!(",size={}", l.size_text));
    }
    Some(out)
}

/// Compares a declared volume with the live value of its key (if any); `Err` with the
/// sentence when the difference cannot be made in place (S18).
pub(crate) fn compare(
    key: &str,
    declared: &Disk,
    live: Option<&str>,
) -> Result<VolumeDiff, String> {
    let Some(text) = live else {
        return Ok(VolumeDiff {
            write: Some(declared.create_value()),
            grow: None,
        });
    };
    let Some(l) = parse_live(text) else {
        return Err(format!("{key} is {text:?}, which cannot be read as a disk"));
    };
    if l.storage() != declared.storage {
        return Err(format!(
            "{key} is on storage {}, declared on {}: moving a disk is not a config change, and it is never replaced (S18)",
            l.storage(),
            declared.storage
        ));
    }
    let Some(want) = declared.size_gib.checked_mul(GIB) else {
        return Err(format!(
            "{key}: {} GiB is more than a disk can be",
            declared.size_gib
        ));
    };
    let Some(have) = l.size_bytes else {
        return Err(format!(
            "{key} ({text}) has no size; refusing to guess what it is"
        ));
    };
    if have > want {
        return Err(format!(
            "{key} is {} GiB, declared {} GiB: a disk never shrinks (S18)",
            have as f64 / GIB as f64,
            declared.size_gib
        ));
    }
    Ok(VolumeDiff {
        write: with_options(&l, &declared.options),
        grow: (have < want).then(|| (l.size_text.clone(), declared.size_gib)),
    })
}

/// Compares a declared state volume with the live value of its key: storage and declared
/// options only. `Ok(Some)`: a config write of this value.
pub(crate) fn compare_state(
    key: &str,
    declared: &StateDisk,
    live: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(text) = live else {
        return Ok(Some(declared.create_value()));
    };
    let Some(l) = parse_live(text) else {
        return Err(format!("{key} is {text:?}, which cannot be read as a disk"));
    };
    if l.storage() != declared.storage {
        return Err(format!(
            "{key} is on storage {}, declared on {}: moving a disk is not a config change, and it is never replaced (S18)",
            l.storage(),
            declared.storage
        ));
    }
    let differs: Vec<&String> = declared
        .options
        .iter()
        .filter(|(k, v)| !l.options.iter().any(|(lk, lv)| lk == *k && lv == *v))
        .map(|(k, _)| k)
        .collect();
    if differs.is_empty() {
        return Ok(None);
    }
    Err(format!(
        "{key} differs in {differs:?}: it is made with its options at create; other options mean a new volume, which is never made in place (S18)"
    ))
}

/// What a guest's fresh read says about one of its volumes.
#[derive(Debug, Clone)]
pub(crate) struct VolumeRead {
    /// The volume's value, if the key is set.
    pub value: Option<String>,
    /// The config's digest.
    pub digest: String,
    /// The guest's lock, if it holds one.
    pub lock: Option<String>,
}

/// One volume's growth to a declared size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Growth<'a> {
    /// The guest.
    pub object: &'a ObjectRef,
    /// The volume's key (`scsi0`, `rootfs`, `mp1`).
    pub key: &'a str,
    /// The storage it must still be on.
    pub storage: &'a str,
    /// The declared size in GiB.
    pub to_gib: u64,
}

/// Grows a volume by PVE's resize task to its declared absolute size (never `+SIZE`, so a
/// repeat is harmless): after the guest's lock clears (S10), from a fresh read that still shows
/// the volume on its storage and smaller than declared, with that read's digest (S9: when
/// `planned` is the plan's digest and nothing was written since the plan, a fresh read whose
/// digest differs is a change, and nothing is sent); the task recorded, then awaited (S13, S14,
/// S29).
///
/// # Errors
///
/// [`ErrorKind::Changed`] when the volume is gone, moved or larger than declared, or the
/// config changed since the plan; the read's, the lock wait's and the task's failures.
pub(crate) async fn grow<O, R, RF, M>(
    cx: &Cx,
    g: Growth<'_>,
    planned: Option<&str>,
    read: R,
    make: M,
    on_started: OnStarted<'_>,
) -> Result<(), Failure>
where
    R: Fn() -> RF,
    RF: Future<Output = Result<VolumeRead, Failure>>,
    M: Fn(String, String) -> O,
    O: Operation<Response = Upid> + Sync,
{
    let changed = |why: String| {
        Failure::new(
            ErrorKind::Changed,
            format!("{}: {why}; nothing was sent", g.object),
        )
    };
    let mut now = read().await?;
    if now.lock.is_some() {
        let poll = crate::kit::guest::poll_interval(cx.lock_wait());
        crate::kit::guest::wait_unlocked(g.object, cx.lock_wait(), poll, || async {
            Ok(read().await?.lock)
        })
        .await?;
        now = read().await?;
    } else if planned.is_some_and(|d| d != now.digest) {
        return Err(changed("its config changed since it was read".to_owned()));
    }
    let Some(value) = now.value else {
        return Err(changed(format!("{} is gone", g.key)));
    };
    let Some(l) = parse_live(&value) else {
        return Err(changed(format!("{} is {value:?}, not a disk", g.key)));
    };
    if l.storage() != g.storage {
        return Err(changed(format!(
            "{} moved to storage {}",
            g.key,
            l.storage()
        )));
    }
    let want = g.to_gib.saturating_mul(GIB);
    match l.size_bytes {
        Some(have) if have == want => return Ok(()),
        Some(have) if have < want => {}
        _ => {
            return Err(changed(format!(
                "{} is {}, not smaller than the declared {} GiB",
                g.key, l.size_text, g.to_gib
            )))
        }
    }
    let req = make(format!("{}G", g.to_gib), now.digest);
    crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started).await?;
    Ok(())
}

/// A guest's config as a fresh read gives it: what [`grow_planned`] needs of it.
#[derive(Debug, Clone)]
pub(crate) struct ConfigRead {
    /// The config in wire form.
    pub map: BTreeMap<String, String>,
    /// Its digest.
    pub digest: String,
    /// The guest's lock, if it holds one.
    pub lock: Option<String>,
}

/// A guest's planned growths: its `resize:KEY` changes, and the plan's digest when nothing was
/// written before the first of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned<'a> {
    /// The guest.
    pub object: &'a ObjectRef,
    /// The `resize:KEY` changes, in order.
    pub resizes: &'a [&'a Change],
    /// The plan's digest, if nothing was written since the plan.
    pub digest: Option<&'a str>,
}

/// S9, S10, S13: each planned growth of guest `g` in turn, by [`grow`]: the first with the
/// plan's digest when nothing was written before it, the others from a fresh read.
///
/// # Errors
///
/// [`GuestError::Inexpressible`] for a key no declared volume has; [`GuestError::Write`] with
/// [`grow`]'s failure.
pub(crate) async fn grow_planned<G: Guest>(
    cx: &Cx,
    g: &G,
    p: Planned<'_>,
    on_started: OnStarted<'_>,
) -> Result<(), GuestError> {
    let (object, mut planned) = (p.object, p.digest);
    for c in p.resizes {
        let key = &c.key["resize:".len()..];
        let Some(disk) = g.volume(key) else {
            return Err(GuestError::Inexpressible {
                object: object.clone(),
                why: format!("{} names no declared volume", c.key),
            });
        };
        let growth = Growth {
            object,
            key,
            storage: &disk.storage,
            to_gib: disk.size_gib,
        };
        let read_volume = || async {
            let gone = || Failure::new(ErrorKind::Changed, format!("{object} is gone"));
            let live = g.read(cx.client()).await?.ok_or_else(gone)?;
            let live = G::config(&live);
            Ok(VolumeRead {
                value: live.map.get(key).cloned(),
                digest: live.digest,
                lock: live.lock,
            })
        };
        let make = |size: String, digest: String| g.resize_request(key, size, digest);
        grow(cx, growth, planned, read_volume, make, on_started)
            .await
            .map_err(|source| GuestError::Write {
                object: object.clone(),
                action: "resize",
                source,
            })?;
        planned = None;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s18_storage_changes_and_shrinks_are_refused_growth_is_a_resize_options_a_write() {
        let d = Disk::new("local-lvm", 32).option("iothread", "1");
        assert_eq!(d.create_value(), "local-lvm:32,iothread=1");
        assert_eq!(Disk::from_create_value(&d.create_value()), Some(d.clone()));
        let live = "local-lvm:vm-100-disk-0,iothread=1,size=32G";
        assert!(compare("scsi0", &d, Some(live))
            .expect("compares")
            .is_empty());
        assert_eq!(
            compare("scsi0", &d, None)
                .expect("compares")
                .write
                .as_deref(),
            Some("local-lvm:32,iothread=1")
        );
        assert_eq!(
            compare(
                "scsi0",
                &d,
                Some("local-lvm:vm-100-disk-0,discard=on,size=32768M")
            )
            .expect("compares"),
            VolumeDiff {
                write: Some("local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32768M".into()),
                grow: None
            }
        );
        assert_eq!(
            compare(
                "scsi0",
                &d,
                Some("local-lvm:vm-100-disk-0,iothread=1,size=16G")
            )
            .expect("compares"),
            VolumeDiff {
                write: None,
                grow: Some(("16G".into(), 32))
            }
        );
        for (live, says) in [
            ("ceph:vm-100-disk-0,size=32G", "moving a disk"),
            (
                "local-lvm:vm-100-disk-0,iothread=1,size=64G",
                "never shrinks",
            ),
            ("local-lvm:vm-100-disk-0,iothread=1", "has no size"),
        ] {
            let why = compare("scsi0", &d, Some(live)).expect_err("refused");
            assert!(why.contains(says), "{why}");
        }
        let mp = Disk::mount("local-lvm", 8, "/srv");
        assert_eq!(
            compare(
                "mp0",
                &mp,
                Some("volume=local-lvm:vm-101-disk-1,mp=/srv,size=8G")
            )
            .expect("compares"),
            VolumeDiff::default()
        );
        let huge = Disk::new("local-lvm", 1 << 40);
        assert_eq!(
            huge.problem().as_deref(),
            Some("1099511627776 GiB is more than a disk can be")
        );
        assert!(compare("scsi0", &huge, Some(live)).is_err());
        assert!(Disk::new("local-lvm", 0).problem().is_some());
        assert!(Disk::new("local:lvm", 8).problem().is_some());
        assert!(Disk::new("local-lvm", 8)
            .option("cache", "a,b")
            .problem()
            .is_some());
        assert_eq!(d.problem(), None);
    }

    #[test]
    fn s18_state_volumes_compare_on_storage_and_options_never_size() {
        let efi = StateDisk::new("local-lvm").option("efitype", "4m");
        assert_eq!(efi.create_value(), "local-lvm:1,efitype=4m");
        assert_eq!(
            StateDisk::from_create_value(&efi.create_value()),
            Some(efi.clone())
        );
        let live = "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=528K";
        assert_eq!(compare_state("efidisk0", &efi, Some(live)), Ok(None));
        assert_eq!(
            compare_state("efidisk0", &efi, None),
            Ok(Some("local-lvm:1,efitype=4m".into()))
        );
        assert!(compare_state(
            "efidisk0",
            &efi,
            Some("ceph:vm-100-disk-1,efitype=4m,size=4M")
        )
        .expect_err("refused")
        .contains("moving"));
        assert!(compare_state(
            "efidisk0",
            &efi,
            Some("local-lvm:vm-100-disk-1,efitype=2m,size=128K")
        )
        .expect_err("refused")
        .contains("efitype"));
    }
}
