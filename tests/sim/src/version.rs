//! The PVE release the simulator plays (`SimConfig::pve_version`): what `/version` reports, which
//! operations exist (an operation newer than the release answers 501, as PVE's router does for a
//! path it does not have), and the answers that changed between releases at patch level.
//!
//! Parameters stay those of the schema the facts table was generated from (9.2): an older
//! release that took fewer parameters is not modelled.

use std::fmt;
use std::str::FromStr;

/// A pve-manager version, `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PveVersion {
    /// Major release.
    pub major: u16,
    /// Minor release.
    pub minor: u16,
    /// Patch level.
    pub patch: u16,
}

impl PveVersion {
    /// `MAJOR.MINOR.PATCH`.
    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        PveVersion {
            major,
            minor,
            patch,
        }
    }

    /// The oldest release the simulator plays.
    pub const OLDEST: PveVersion = PveVersion::new(8, 4, 0);
    /// The newest release the simulator plays (the facts table's schema).
    pub const NEWEST: PveVersion = PveVersion::new(9, 2, 0);

    /// pve-manager 9.1.5 answers every failed authentication (bad token, bad ticket) with the one
    /// text `Authentication failed!` (pve-manager commit 26c10a2e, `PVE/HTTPServer.pm`
    /// `auth_handler`); before, each failure had its own text.
    pub const UNIFIED_AUTH_FAILURE: PveVersion = PveVersion::new(9, 1, 5);

    /// `MAJOR.MINOR`, as `/version` reports `release`.
    pub fn release(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Whether an operation that first appeared in `since` (`9.1`) exists in this release.
    /// An unreadable `since` counts as present.
    pub fn has(&self, since: &str) -> bool {
        match since.split_once('.') {
            Some((a, b)) => match (a.parse::<u16>(), b.parse::<u16>()) {
                (Ok(a), Ok(b)) => (a, b) <= (self.major, self.minor),
                _ => true,
            },
            None => true,
        }
    }
}

impl fmt::Display for PveVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a version was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError(pub String);

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unsupported PVE version {:?}: expected MAJOR.MINOR.PATCH (or MAJOR.MINOR) from {} to \
             {}.x",
            self.0,
            PveVersion::OLDEST,
            PveVersion::NEWEST.release()
        )
    }
}

impl std::error::Error for VersionError {}

impl FromStr for PveVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, VersionError> {
        let bad = || VersionError(s.to_owned());
        let parts: Vec<&str> = s.split('.').collect();
        let num = |p: &str| {
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                p.parse::<u16>().ok()
            }
        };
        let v = match parts.as_slice() {
            [a, b] => PveVersion::new(num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?, 0),
            [a, b, c] => PveVersion::new(
                num(a).ok_or_else(bad)?,
                num(b).ok_or_else(bad)?,
                num(c).ok_or_else(bad)?,
            ),
            _ => return Err(bad()),
        };
        let newest = (PveVersion::NEWEST.major, PveVersion::NEWEST.minor);
        if v < PveVersion::OLDEST || (v.major, v.minor) > newest {
            return Err(bad());
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_within_the_supported_range_only() {
        assert_eq!("9.1.4".parse(), Ok(PveVersion::new(9, 1, 4)));
        assert_eq!("8.4".parse(), Ok(PveVersion::new(8, 4, 0)));
        assert_eq!("9.2.17".parse(), Ok(PveVersion::new(9, 2, 17)));
        for bad in [
            "", "9", "9.3.0", "8.3.9", "9.1.x", "9..1", "9.1.4.1", "+9.1", "99999.1",
        ] {
            assert!(bad.parse::<PveVersion>().is_err(), "{bad:?}");
        }
        let v = PveVersion::new(9, 1, 4);
        assert!(v.has("9.1") && v.has("8.4") && !v.has("9.2"));
        assert!(v < PveVersion::UNIFIED_AUTH_FAILURE);
        assert_eq!(v.release(), "9.1");
    }
}
