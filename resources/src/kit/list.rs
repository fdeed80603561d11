//! The ordered-list shape: a family whose objects are the entries of one list PVE keeps in
//! order and addresses by position (a firewall's rules: `POST .../rules` with `pos` inserts,
//! `PUT .../rules/{pos}` with `moveto` moves, `DELETE .../rules/{pos}` removes, each entry
//! renumbering the ones after it; pve-firewall `src/PVE/API2/Firewall/Rules.pm`).
//!
//! A declaration is the whole list, in order. The plan reads the list once and works out the
//! edits that turn it into the declared one ([`edits`]): removals first, from the end, so that
//! every position a later edit names is the one the list has when it is sent; then, position
//! by position, a move of an entry that is further down, or an insert of one that is not
//! there. An entry is compared whole (its position aside): one that differs is removed and the
//! declared one inserted, never edited in place, so that no edit depends on which of two equal
//! entries PVE renumbered. Each edit is sent with the list's digest from a fresh read (S9,
//! S31: the list is one file).
//!
//! # Guarantees
//!
//! - **S6** A list that already holds the declared entries, in order, plans no edit.
//! - **S8** Entries compare in their normalised form ([`OrderedList::normalise`]).
//! - Applying the edits to the live list gives the declared list, duplicates included.

use std::fmt;

use crate::contract::{BoxFuture, Cx, Failure};

/// One edit of an ordered list, by position (0 the first entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEdit<T> {
    /// Remove the entry at `pos`.
    Delete {
        /// Its position.
        pos: usize,
    },
    /// Move the entry at `from` to `to` (`to < from`: the entries between shift down one).
    Move {
        /// Where it is.
        from: usize,
        /// Where it goes.
        to: usize,
    },
    /// Insert `item` at `pos` (the entries from there shift down one).
    Insert {
        /// Where.
        pos: usize,
        /// The entry.
        item: T,
    },
}

impl<T: fmt::Display> fmt::Display for ListEdit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListEdit::Delete { pos } => write!(f, "delete #{pos}"),
            ListEdit::Move { from, to } => write!(f, "move #{from} to #{to}"),
            ListEdit::Insert { pos, item } => write!(f, "insert #{pos}: {item}"),
        }
    }
}

/// A list as read: its entries in order, and the digest of the file that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed<T> {
    /// The entries, in order.
    pub items: Vec<T>,
    /// The digest.
    pub digest: String,
}

/// What a family of the ordered-list shape says of itself: how its list is read and one edit
/// sent. The plan's edits come from [`edits`].
pub trait OrderedList: Send + Sync {
    /// One entry, in the form the family compares.
    type Item: PartialEq + Clone + fmt::Display + Send + Sync;
    /// The list as it is now, in order, with its digest.
    fn read<'a>(&'a self, cx: &'a Cx) -> BoxFuture<'a, Result<Listed<Self::Item>, Failure>>;
    /// Sends one edit with `digest` (a fresh read's).
    fn send<'a>(
        &'a self,
        cx: &'a Cx,
        edit: &'a ListEdit<Self::Item>,
        digest: &'a str,
    ) -> BoxFuture<'a, Result<(), Failure>>;
    /// The one form entries are compared in (S8); the identity by default.
    fn normalise(item: Self::Item) -> Self::Item {
        item
    }
}

/// The edits that turn `live` into `declared`: removals of what `declared` does not hold,
/// from the last, then per position a move up of an entry further down, or an insert.
pub fn edits<T: PartialEq + Clone>(live: &[T], declared: &[T]) -> Vec<ListEdit<T>> {
    let mut out = Vec::new();
    let mut cur: Vec<T> = live.to_vec();
    // What declared holds is kept once per declared occurrence; the rest goes, from the end.
    let mut wanted: Vec<&T> = declared.iter().collect();
    let mut keep = vec![false; cur.len()];
    for (i, item) in cur.iter().enumerate() {
        if let Some(w) = wanted.iter().position(|d| *d == item) {
            wanted.swap_remove(w);
            keep[i] = true;
        }
    }
    for pos in (0..cur.len()).rev().filter(|i| !keep[*i]) {
        out.push(ListEdit::Delete { pos });
        cur.remove(pos);
    }
    for (i, item) in declared.iter().enumerate() {
        if cur.get(i) == Some(item) {
            continue;
        }
        match cur.iter().skip(i + 1).position(|c| c == item) {
            Some(j) => {
                let from = i + 1 + j;
                out.push(ListEdit::Move { from, to: i });
                let moved = cur.remove(from);
                cur.insert(i, moved);
            }
            None => {
                out.push(ListEdit::Insert {
                    pos: i,
                    item: item.clone(),
                });
                cur.insert(i, item.clone());
            }
        }
    }
    out
}

/// Applies `edits` to `list` as PVE would (for checking a plan).
pub fn apply<T: Clone>(list: &mut Vec<T>, edits: &[ListEdit<T>]) {
    for e in edits {
        match e {
            ListEdit::Delete { pos } => {
                list.remove(*pos);
            }
            ListEdit::Move { from, to } => {
                let item = list.remove(*from);
                list.insert(*to, item);
            }
            ListEdit::Insert { pos, item } => list.insert(*pos, item.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(live: &[&str], declared: &[&str]) -> Vec<ListEdit<&'static str>> {
        let live: Vec<&'static str> = live.iter().map(|s| leak(s)).collect();
        let declared: Vec<&'static str> = declared.iter().map(|s| leak(s)).collect();
        let e = edits(&live, &declared);
        let mut after = live.clone();
        apply(&mut after, &e);
        assert_eq!(after, declared, "{live:?} -> {declared:?} by {e:?}");
        e
    }

    fn leak(s: &str) -> &'static str {
        Box::leak(s.to_owned().into_boxed_str())
    }

    #[test]
    fn s06_the_edits_turn_the_live_list_into_the_declared_one_and_none_when_it_matches() {
        assert!(check(&["a", "b", "c"], &["a", "b", "c"]).is_empty());
        assert!(check(&[], &[]).is_empty());
        assert_eq!(
            check(&["a", "x", "b"], &["a", "b"]),
            [ListEdit::Delete { pos: 1 }]
        );
        assert_eq!(
            check(&["c", "a", "b"], &["a", "b", "c"]),
            [
                ListEdit::Move { from: 1, to: 0 },
                ListEdit::Move { from: 2, to: 1 }
            ]
        );
        assert_eq!(
            check(&["a", "c"], &["a", "b", "c"]),
            [ListEdit::Insert { pos: 1, item: "b" }]
        );
        // Duplicates count: two declared, one live.
        assert_eq!(
            check(&["a", "b"], &["a", "b", "a"]),
            [ListEdit::Insert { pos: 2, item: "a" }]
        );
        // Everything at once, and from nothing, and to nothing.
        check(&["z", "c", "a", "y", "a", "b"], &["a", "b", "c", "d"]);
        check(&[], &["a", "b"]);
        assert_eq!(
            check(&["a", "b"], &[]),
            [ListEdit::Delete { pos: 1 }, ListEdit::Delete { pos: 0 }]
        );
        // Every permutation of four entries and every subset of a fifth.
        let all = ["a", "b", "c", "d", "e"];
        for mask in 0..32u32 {
            let live: Vec<&str> = (0..5)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| all[i])
                .collect();
            for rot in 0..4 {
                let mut declared = vec!["d", "c", "b", "a"];
                declared.rotate_left(rot);
                check(&live, &declared);
            }
        }
    }

    #[test]
    fn an_edit_prints_as_the_plan_shows_it() {
        let shown: Vec<String> = [
            ListEdit::Delete { pos: 3 },
            ListEdit::Move { from: 2, to: 0 },
            ListEdit::Insert {
                pos: 1,
                item: "IN ACCEPT -p tcp -dport 22",
            },
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            shown,
            [
                "delete #3",
                "move #2 to #0",
                "insert #1: IN ACCEPT -p tcp -dport 22"
            ]
        );
    }
}
