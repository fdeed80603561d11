//! Task ids (UPIDs): `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:`, and PBS's,
//! which has a task id after `pstart`:
//! `UPID:<node>:<pid>:<pstart>:<task_id>:<starttime>:<type>:<id>:<authid>:`.

use std::fmt;
use std::str::FromStr;

/// A task id as PVE writes it. Parses and displays back to exactly the same text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Upid {
    raw: String,
    node: String,
    pid: u32,
    pstart: u64,
    task_id: Option<u64>,
    starttime: u64,
    task_type: String,
    id: String,
    user: String,
}

/// Why a text is not a UPID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a task id (UPID): {0:?}")]
pub struct UpidError(String);

impl Upid {
    /// The node the task runs on.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process start time (jiffies).
    pub fn pstart(&self) -> u64 {
        self.pstart
    }

    /// PBS: the task's serial number within its process (`None` for a PVE UPID).
    pub fn task_id(&self) -> Option<u64> {
        self.task_id
    }

    /// When the task started (Unix seconds).
    pub fn starttime(&self) -> u64 {
        self.starttime
    }

    /// The task type, e.g. `qmcreate`, `srvreload`.
    pub fn task_type(&self) -> &str {
        &self.task_type
    }

    /// The task's object id, e.g. `100`, `networking`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The user that started it (`root@pam`), without the token id.
    pub fn user(&self) -> &str {
        self.user.split('!').next().unwrap_or(&self.user)
    }

    /// The API token id that started it, if a token did.
    pub fn token_id(&self) -> Option<&str> {
        self.user.split_once('!').map(|(_, t)| t)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

/// `len` hex digits (for the fields PVE writes with `%08X`; `pstart` may have 9).
fn hex(s: &str, lens: std::ops::RangeInclusive<usize>) -> Option<u64> {
    if !lens.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// A node name as the UPID pattern has it: `[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?`.
fn node_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `[^:\s/]+` (or `*` when `empty` is allowed): no colon, whitespace or slash.
fn field_ok(s: &str, empty: bool) -> bool {
    (empty || !s.is_empty()) && !s.chars().any(|c| c == ':' || c == '/' || c.is_whitespace())
}

/// Parses exactly what PVE's own pattern accepts (pve-common `src/PVE/UPID.pm`, `decode`;
/// before 9.0 `src/PVE/Tools.pm`, `upid_decode`, which refuses `/` since 8.4):
/// `UPID:$node:$pid(8 hex):$pstart(8-9 hex):$starttime(8 hex):$type:$id:$user:`, the node a
/// host name (so never `.` or `..`), type and user non-empty, none of the three holding `:`,
/// whitespace or `/`. So a UPID is always one safe path segment.
impl FromStr for Upid {
    type Err = UpidError;

    fn from_str(s: &str) -> Result<Self, UpidError> {
        let bad = || UpidError(s.to_owned());
        let rest = s.strip_prefix("UPID:").ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        // PBS (proxmox-rest-server `src/worker_task.rs`, `PROXMOX_UPID_REGEX`): a task id of
        // 8-16 hex digits after pstart.
        let (node, pid, pstart, task_id, starttime, task_type, id, user, end) = match parts[..] {
            [node, pid, pstart, starttime, task_type, id, user, end] => {
                (node, pid, pstart, None, starttime, task_type, id, user, end)
            }
            [node, pid, pstart, task_id, starttime, task_type, id, user, end] => (
                node,
                pid,
                pstart,
                Some(hex(task_id, 8..=16).ok_or_else(bad)?),
                starttime,
                task_type,
                id,
                user,
                end,
            ),
            _ => return Err(bad()),
        };
        if !end.is_empty()
            || !node_ok(node)
            || !field_ok(task_type, false)
            || !field_ok(id, true)
            || !field_ok(user, false)
        {
            return Err(bad());
        }
        let pid = hex(pid, 8..=8)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(bad)?;
        Ok(Upid {
            raw: s.to_owned(),
            node: node.to_owned(),
            pid,
            pstart: hex(pstart, 8..=9).ok_or_else(bad)?,
            task_id,
            starttime: hex(starttime, 8..=8).ok_or_else(bad)?,
            task_type: task_type.to_owned(),
            id: id.to_owned(),
            user: user.to_owned(),
        })
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl serde::Serialize for Upid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> serde::Deserialize<'de> for Upid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_part_and_displays_back() {
        let text = "UPID:pve1:0001A2B3:0ABCDEF0:6700FF01:qmcreate:100:root@pam!deploy:";
        let u: Upid = text.parse().expect("parses");
        assert_eq!(u.node(), "pve1");
        assert_eq!(u.pid(), 0x0001_A2B3);
        assert_eq!(u.pstart(), 0x0ABC_DEF0);
        assert_eq!(u.starttime(), 0x6700_FF01);
        assert_eq!(u.task_type(), "qmcreate");
        assert_eq!(u.id(), "100");
        assert_eq!(u.user(), "root@pam");
        assert_eq!(u.token_id(), Some("deploy"));
        assert_eq!(u.to_string(), text);
        let plain: Upid = "UPID:pve1:00001234:00005678:6700AAAA:srvreload:networking:root@pam:"
            .parse()
            .expect("parses");
        assert_eq!(plain.token_id(), None);
    }

    #[test]
    fn parses_a_pbs_upid_with_its_task_id() {
        // The shape proxmox-rest-server writes: a task id between pstart and starttime, the
        // worker id systemd-escaped (so never a `/`).
        let text =
            "UPID:pbs1:000004D2:0000162E:00000003:6752A1B0:create-datastore:store1:root@pam!ci:";
        let u: Upid = text.parse().expect("parses");
        assert_eq!(u.node(), "pbs1");
        assert_eq!(u.pid(), 0x04D2);
        assert_eq!(u.pstart(), 0x162E);
        assert_eq!(u.task_id(), Some(3));
        assert_eq!(u.starttime(), 0x6752_A1B0);
        assert_eq!(u.task_type(), "create-datastore");
        assert_eq!(u.id(), "store1");
        assert_eq!(u.user(), "root@pam");
        assert_eq!(u.token_id(), Some("ci"));
        assert_eq!(u.to_string(), text);
        let pve: Upid = "UPID:pve1:00001234:00005678:6700AAAA:srvreload:networking:root@pam:"
            .parse()
            .expect("parses");
        assert_eq!(pve.task_id(), None);
        for bad in [
            // task id too short, too long, not hex; a `/` in the worker id; ten fields.
            "UPID:pbs1:000004D2:0000162E:0003:6752A1B0:t:i:root@pam:",
            "UPID:pbs1:000004D2:0000162E:00000000000000003:6752A1B0:t:i:root@pam:",
            "UPID:pbs1:000004D2:0000162E:0000000Z:6752A1B0:t:i:root@pam:",
            "UPID:pbs1:000004D2:0000162E:00000003:6752A1B0:t:../x:root@pam:",
            "UPID:pbs1:000004D2:0000162E:00000003:6752A1B0:t:i:x:root@pam:",
        ] {
            assert!(bad.parse::<Upid>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn rejects_what_is_not_a_upid() {
        for bad in [
            "",
            "UPID:",
            "not-a-upid",
            "UPID:pve1:zz:00005678:6700AAAA:t:i:u:",
            "UPID:pve1:00001234:00005678:6700AAAA:t:i:u",
            "UPID::00001234:00005678:6700AAAA:t:i:u:",
            // What PVE's pattern refuses, though it splits into the right number of fields:
            "UPID:..:00001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:.:00001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:-pve:00001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:pve-:00001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:pve.example.com:00001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:pve1:1234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:pve1:000001234:00005678:6700AAAA:t:i:u@pam:",
            "UPID:pve1:00001234:5678:6700AAAA:t:i:u@pam:",
            "UPID:pve1:00001234:0000000005678:6700AAAA:t:i:u@pam:",
            "UPID:pve1:00001234:00005678:AAAA:t:i:u@pam:",
            "UPID:pve1:00001234:00005678:6700AAAA::i:u@pam:",
            "UPID:pve1:00001234:00005678:6700AAAA:t:i::",
            "UPID:pve1:00001234:00005678:6700AAAA:t:../../x:u@pam:",
            "UPID:pve1:00001234:00005678:6700AAAA:t/x:i:u@pam:",
            "UPID:pve1:00001234:00005678:6700AAAA:t:i:u@pam/x:",
            "UPID:pve1:00001234:00005678:6700AAAA:t:a b:u@pam:",
            "UPID:pve1:00001234:00005678:6700AAAA:t:i:u@pam:\n",
            "UPID:pve1:00001234:00005678:6700AAAA:t:i:u@pam:extra:",
            " UPID:pve1:00001234:00005678:6700AAAA:t:i:u@pam:",
        ] {
            assert!(bad.parse::<Upid>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn accepts_what_pves_pattern_accepts() {
        for good in [
            // pstart of 9 digits (over 497 days of uptime), an empty id, a token user.
            "UPID:pve1:00001234:123456789:6700AAAA:aptupdate::root@pam:",
            "UPID:node-2:0000ABCD:00005678:6700aaaa:vzdump:100:root@pam!backup:",
            "UPID:a:00001234:00005678:6700AAAA:qmstart:100:u@pve:",
        ] {
            let u: Upid = good.parse().expect(good);
            assert_eq!(u.to_string(), good);
        }
    }
}
