//! The committed first-version facts (`apispec/since.txt`): for every operation the generator
//! has seen, the first PVE release (of those it was given) whose schema has it. `Operation::SINCE`
//! comes from here, so that regenerating from one new schema (the schemas themselves are not
//! committed) keeps every older operation's release instead of calling it new.
//!
//! One line per operation, `METHOD /path X.Y`, sorted; `#` starts a comment. The table and any
//! older schemas given must agree: a disagreement is an error, never a silent rewrite.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Operation (`METHOD /path`) -> first release.
pub type Since = BTreeMap<String, (u16, u16)>;

/// Reads the table.
///
/// # Errors
///
/// The file cannot be read, or a line is not `METHOD /path X.Y`.
pub fn read(path: &Path) -> Result<Since, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the table's text.
///
/// # Errors
///
/// The first malformed or repeated line.
pub fn parse(text: &str) -> Result<Since, String> {
    let mut out = Since::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: expected `METHOD /path X.Y`, got {line:?}", n + 1);
        let (op, version) = line.rsplit_once(' ').ok_or_else(bad)?;
        let (major, minor) = version.split_once('.').ok_or_else(bad)?;
        let v = (
            major.parse().map_err(|_| bad())?,
            minor.parse().map_err(|_| bad())?,
        );
        let (method, path) = op.split_once(' ').ok_or_else(bad)?;
        if !matches!(method, "GET" | "POST" | "PUT" | "DELETE") || !path.starts_with('/') {
            return Err(bad());
        }
        if out.insert(op.to_owned(), v).is_some() {
            return Err(format!("line {}: {op} is listed twice", n + 1));
        }
    }
    Ok(out)
}

/// The table's text.
pub fn render(since: &Since) -> String {
    let mut out = String::from(
        "# The first PVE release whose schema has each operation (of the releases pve-codegen was\n\
         # given): Operation::SINCE. Written by `pve-codegen import` and `pve-codegen since`; facts\n\
         # only (methods, paths, release numbers).\n",
    );
    for (op, (a, b)) in since {
        let _ = writeln!(out, "{op} {a}.{b}");
    }
    out
}

/// Adds `ops` first seen in `version` to `since`; answers how many were added.
pub fn add(since: &mut Since, ops: impl IntoIterator<Item = String>, version: (u16, u16)) -> usize {
    let mut added = 0;
    for op in ops {
        since.entry(op).or_insert_with(|| {
            added += 1;
            version
        });
    }
    added
}

/// The newest release the table names.
pub fn newest(since: &Since) -> Option<(u16, u16)> {
    since.values().max().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_back_as_written_and_refuses_what_it_cannot_read() {
        let mut s = Since::new();
        assert_eq!(
            add(
                &mut s,
                ["GET /version".into(), "POST /pools".into()],
                (8, 4)
            ),
            2
        );
        assert_eq!(
            add(&mut s, ["GET /version".into(), "GET /new".into()], (9, 3)),
            1
        );
        assert_eq!(s["GET /version"], (8, 4), "an older release is kept");
        assert_eq!(newest(&s), Some((9, 3)));
        assert_eq!(parse(&render(&s)), Ok(s));
        for bad in [
            "GET /version",
            "GET /version 9",
            "GET /version 9.x",
            "FETCH /version 9.2",
            "GET version 9.2",
            "GET /a 9.2\nGET /a 9.2",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
