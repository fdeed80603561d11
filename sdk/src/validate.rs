//! Client-side checks of what PVE itself checks, made before anything is sent.
//!
//! - **Path segments.** PVE un-escapes the request path before routing it, and its router drops
//!   empty segments (pve-common `src/PVE/RESTHandler.pm`, `find_handler`); the URL parser on this
//!   side resolves `.` and `..` segments. So a path parameter that is empty, `.`, `..` or holds a
//!   `/` would make a request reach another endpoint than the one its operation names
//!   (`DELETE /nodes/pve1/qemu/100/snapshot/..` is `DELETE /nodes/pve1/qemu/100`). Such a value
//!   is refused. The few parameters PVE routes as the rest of the path (`fragmentDelimiter =>
//!   ''`: a storage volume, a firewall IPSet entry) may hold `/`, but no empty, `.` or `..`
//!   component: which ones they are comes from `patches/` (`kind = "path-rest"`).
//! - **Formats.** The named formats PVE verifies (`pve-node`, `pve-vmid`, ...) are checked with
//!   PVE's own regexes, from one table (`crate::generated::formats`) that the generator writes
//!   from `patches/` (`kind = "formats"`), each entry with the upstream function it comes from.
//!   Formats not in the table are not checked: never stricter than PVE.
//!
//! # Guarantees
//!
//! A request whose path would not route to its own operation is never sent: the error names
//! the parameter and why.

use std::fmt;

/// A named format PVE verifies, with the regex (and length bounds) PVE checks it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The format's name in PVE's schema, e.g. `pve-node`.
    pub name: &'static str,
    /// The anchored regex (`^...$`) a valid value matches.
    pub pattern: &'static str,
    /// The fewest characters a valid value has, when PVE checks a length besides the regex.
    pub min_length: Option<usize>,
    /// The most characters a valid value has, when PVE checks a length besides the regex.
    pub max_length: Option<usize>,
    /// For a format PVE registers as a property string (a hash of keys, which the schema only
    /// names, such as qemu-server's `pve-qm-ipconfig`): its keys and their facts, as JSON in the
    /// schema's key names; the pattern is then empty.
    pub keys: Option<&'static str>,
    /// The upstream function that verifies it (repository, file, function).
    pub source: &'static str,
}

impl Format {
    /// Whether `value` is valid in this format.
    pub fn check(&self, value: &str) -> bool {
        let len = value.chars().count();
        if self.min_length.is_some_and(|m| len < m) || self.max_length.is_some_and(|m| len > m) {
            return false;
        }
        if self.keys.is_some() {
            return crate::params::property_string_problem(self, value).is_none();
        }
        // A pattern that does not compile is a generator bug the tests catch; never refuse for it.
        crate::re::cached(self.pattern).is_none_or(|re| re.is_match(value))
    }
}

/// What the runtime knows of one path parameter beyond its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParam {
    /// The parameter's name in the path template.
    pub name: &'static str,
    /// PVE routes it as the rest of the path: it may hold `/` (but no empty, `.` or `..`
    /// component).
    pub rest: bool,
    /// The format PVE verifies it with, when the SDK checks that format.
    pub format: Option<&'static Format>,
}

/// Why a path parameter's value is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathProblem {
    /// The value is empty: PVE's router would drop the segment.
    Empty,
    /// The value is `.` or `..`: the URL would resolve it to another path.
    DotSegment,
    /// The value holds a `/`, which PVE splits the path on after un-escaping it.
    Slash,
    /// A rest-of-path value has an empty, `.` or `..` component.
    BadComponent,
    /// The value is not valid in the format PVE verifies it with.
    Format(&'static Format),
}

impl fmt::Display for PathProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathProblem::Empty => f.write_str("is empty: PVE would drop the segment"),
            PathProblem::DotSegment => f.write_str(
                "is a `.` or `..` segment: the request would reach another endpoint",
            ),
            PathProblem::Slash => f.write_str(
                "holds a `/`, which PVE splits the path on: the request would reach another endpoint",
            ),
            PathProblem::BadComponent => f.write_str(
                "has an empty, `.` or `..` component: the request would reach another endpoint",
            ),
            PathProblem::Format(fmt) => write!(
                f,
                "is not a valid `{}` (PVE checks it with `{}`)",
                fmt.name, fmt.pattern
            ),
        }
    }
}

fn is_dots(s: &str) -> bool {
    s == "." || s == ".."
}

/// Checks one path parameter's value: the segment rule, then its format.
///
/// # Errors
///
/// The [`PathProblem`] that makes the value unsafe or invalid.
pub fn check_path_value(value: &str, spec: Option<&PathParam>) -> Result<(), PathProblem> {
    if value.is_empty() {
        return Err(PathProblem::Empty);
    }
    if spec.is_some_and(|s| s.rest) {
        if value.split('/').any(|c| c.is_empty() || is_dots(c)) {
            return Err(PathProblem::BadComponent);
        }
    } else if is_dots(value) {
        return Err(PathProblem::DotSegment);
    } else if value.contains('/') {
        return Err(PathProblem::Slash);
    }
    if let Some(format) = spec.and_then(|s| s.format) {
        if !format.check(value) {
            return Err(PathProblem::Format(format));
        }
    }
    Ok(())
}

/// Checks a whole path for [`crate::Client::raw`]: no empty, `.` or `..` segment.
///
/// # Errors
///
/// The index of the first bad segment (0 is the one after the leading `/`) and the problem.
pub fn check_raw_path(path: &str) -> Result<(), (usize, PathProblem)> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err((0, PathProblem::Empty));
    };
    if rest.is_empty() {
        return Ok(());
    }
    for (i, seg) in rest.split('/').enumerate() {
        if seg.is_empty() {
            return Err((i, PathProblem::Empty));
        }
        if is_dots(seg) {
            return Err((i, PathProblem::DotSegment));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: Format = Format {
        name: "pve-node",
        pattern: "^[a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?$",
        min_length: None,
        max_length: None,
        keys: None,
        source: "test",
    };

    #[test]
    fn segment_rule_refuses_what_would_retarget_a_request() {
        for (value, problem) in [
            ("", PathProblem::Empty),
            (".", PathProblem::DotSegment),
            ("..", PathProblem::DotSegment),
            ("a/b", PathProblem::Slash),
            ("/", PathProblem::Slash),
            ("../100", PathProblem::Slash),
        ] {
            assert_eq!(check_path_value(value, None), Err(problem), "{value:?}");
        }
        for ok in [
            "...", "a.b", ".hidden", "%2e%2e", "snap-1", "a b", "x\u{e9}",
        ] {
            assert_eq!(check_path_value(ok, None), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn rest_of_path_values_may_hold_slashes_but_no_empty_or_dot_component() {
        let rest = PathParam {
            name: "volume",
            rest: true,
            format: None,
        };
        for ok in ["local:iso/a.iso", "10.0.0.0/8", "a/b/c", "x"] {
            assert_eq!(check_path_value(ok, Some(&rest)), Ok(()), "{ok:?}");
        }
        for bad in ["a//b", "/a", "a/", "a/../b", "./a", "a/.", ".."] {
            assert_eq!(
                check_path_value(bad, Some(&rest)),
                Err(PathProblem::BadComponent),
                "{bad:?}"
            );
        }
        assert_eq!(check_path_value("", Some(&rest)), Err(PathProblem::Empty));
    }

    #[test]
    fn formats_are_checked_after_the_segment_rule() {
        let node = PathParam {
            name: "node",
            rest: false,
            format: Some(&NODE),
        };
        assert_eq!(check_path_value("pve1", Some(&node)), Ok(()));
        assert_eq!(
            check_path_value("pve_1", Some(&node)),
            Err(PathProblem::Format(&NODE))
        );
        assert_eq!(
            check_path_value("pve1\n", Some(&node)),
            Err(PathProblem::Format(&NODE))
        );
        assert_eq!(
            check_path_value("..", Some(&node)),
            Err(PathProblem::DotSegment)
        );
        let bounded = Format {
            min_length: Some(3),
            max_length: Some(4),
            pattern: "^.*$",
            ..NODE
        };
        assert!(!bounded.check("ab"));
        assert!(bounded.check("abc"));
        assert!(bounded.check("\u{e9}\u{e9}\u{e9}\u{e9}"));
        assert!(!bounded.check("abcde"));
    }

    #[test]
    fn raw_paths_have_no_empty_or_dot_segment() {
        assert_eq!(check_raw_path("/nodes/pve1/qemu"), Ok(()));
        assert_eq!(check_raw_path("/"), Ok(()));
        assert_eq!(check_raw_path("nodes"), Err((0, PathProblem::Empty)));
        assert_eq!(check_raw_path("/nodes//qemu"), Err((1, PathProblem::Empty)));
        assert_eq!(check_raw_path("/nodes/pve1/"), Err((2, PathProblem::Empty)));
        assert_eq!(
            check_raw_path("/nodes/pve1/qemu/100/snapshot/.."),
            Err((5, PathProblem::DotSegment))
        );
        assert_eq!(
            check_raw_path("/nodes/./qemu"),
            Err((1, PathProblem::DotSegment))
        );
    }
}
