//! The ordered-list shape: a family whose declaration is one list PVE keeps in order and
//! addresses by position (a firewall's rules: `POST .../rules` always inserts at position 0,
//! `PUT .../rules/{pos}` changes an entry or with `moveto` moves it, `DELETE .../rules/{pos}`
//! removes it, each renumbering the entries after it; pve-firewall
//! `src/PVE/API2/Firewall/Rules.pm`).
//!
//! # The edit script (S33)
//!
//! A firewall decides a packet by its first enabled matching rule, else the policy, and the
//! daemon recompiles from the file every few seconds, so every intermediate list of a
//! multi-step change can be live. The script is built so that each intermediate list decides
//! every packet either as the old list did or as the new one will: it never opens or closes
//! more than the change itself.
//!
//! The common head `P` and tail `S` of the old list `P O S` and the new one `P N S` stay. If
//! `O` and `N` are one entry each, or pairwise differ only where no decision depends on it (a
//! comment; two disabled entries), each is replaced in place: one write per entry, each
//! neutral or the whole change. Otherwise:
//!
//! 1. every entry of `N` is inserted **disabled** (no decision), last first, each moved to
//!    just below `P`, which builds `P N° O S`;
//! 2. the entries of `N` declared enabled are enabled **from the top down**: with `N`'s first
//!    `k` enabled, a packet one of them matches is decided by the first of them, as the new
//!    list decides it, and any other packet as the old list does (`O S` after `P`);
//! 3. the entries of `O` are deleted **from the bottom up**: with `O`'s first `k` left, a packet
//!    that `P N` does not match and one of them does is decided as the old list decides it, and
//!    any other packet as the new list does.
//!
//! Each edit is sent with the digest of a read taken just before it, and that read must show
//! the list exactly as the script left it (the entry an insert put at position 0 included):
//! a list that moved under the writer stops the script, never a blind create (S9, S31).
//!
//! # Guarantees
//!
//! - **S6** A list that already holds the declared entries, in order, plans no edit.
//! - **S33** No intermediate list decides a packet as neither the old nor the new list does
//!   (tested on random lists of a small rule language with every intermediate list
//!   evaluated).
//! - Applying the edits to the live list gives the declared list, duplicates included.

use std::fmt;

use pve_sdk::Client;

use crate::contract::{BoxFuture, ErrorKind, Failure};

/// One entry of an ordered list, as the edit script needs to know it.
pub trait Entry: PartialEq + Clone + fmt::Display + Send + Sync {
    /// Whether it takes part in decisions (an enabled rule).
    fn active(&self) -> bool;
    /// The same entry, disabled.
    fn inactive(&self) -> Self;
    /// Whether replacing `self` by `other` in place changes no decision: they differ only in
    /// a comment, or neither takes part.
    fn neutral(&self, other: &Self) -> bool;
}

/// One edit of an ordered list, by position (0 the first entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEdit<T> {
    /// Insert `item` at position 0 (PVE's only insert; the entries shift down one).
    Insert {
        /// The entry (disabled, in a script that changes more than one entry).
        item: T,
    },
    /// Move the entry at `from` so that it ends at `to`.
    Move {
        /// Where it is.
        from: usize,
        /// Where it ends.
        to: usize,
    },
    /// Replace the entry at `pos` by `item` in place.
    Replace {
        /// Its position.
        pos: usize,
        /// The new entry.
        item: T,
    },
    /// Remove the entry at `pos`.
    Delete {
        /// Its position.
        pos: usize,
    },
}

impl<T: fmt::Display> fmt::Display for ListEdit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListEdit::Insert { item } => write!(f, "insert #0: {item}"),
            ListEdit::Move { from, to } => write!(f, "move #{from} to #{to}"),
            ListEdit::Replace { pos, item } => write!(f, "set #{pos}: {item}"),
            ListEdit::Delete { pos } => write!(f, "delete #{pos}"),
        }
    }
}

/// PVE's `moveto` for a move from `from` that ends at `to`: the handler puts the entry before
/// the one that was at `moveto` (pve-firewall `Rules.pm` `update_rule`), so a move down names
/// the position one further.
pub fn moveto(from: usize, to: usize) -> usize {
    if to > from {
        to + 1
    } else {
        to
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
/// sent. [`write()`] runs the script.
pub trait OrderedList: Send + Sync {
    /// One entry, in the form the family compares (S8).
    type Item: Entry;
    /// What the list is, for messages (`the cluster's rules`).
    fn what(&self) -> String;
    /// The list as it is now, in order, with its digest.
    fn read<'a>(&'a self, client: &'a Client)
        -> BoxFuture<'a, Result<Listed<Self::Item>, Failure>>;
    /// Sends one edit with `digest` (a fresh read's); `now` is the list it applies to.
    fn send<'a>(
        &'a self,
        client: &'a Client,
        edit: &'a ListEdit<Self::Item>,
        now: &'a [Self::Item],
        digest: &'a str,
    ) -> BoxFuture<'a, Result<(), Failure>>;
}

/// The edits that turn `live` into `declared` (the module's script).
pub fn edits<T: Entry>(live: &[T], declared: &[T]) -> Vec<ListEdit<T>> {
    let head = live
        .iter()
        .zip(declared)
        .take_while(|(a, b)| a == b)
        .count();
    let room = live.len().min(declared.len()) - head;
    let tail = live
        .iter()
        .rev()
        .zip(declared.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let old = &live[head..live.len() - tail];
    let new = &declared[head..declared.len() - tail];
    let mut out = Vec::new();
    // Entries that differ where no decision depends on it are replaced in place first; the
    // rest is worked out again from there.
    if old.len() == new.len() {
        let mut now = live.to_vec();
        for (i, (a, b)) in old.iter().zip(new).enumerate() {
            if a != b && a.neutral(b) && old.len() > 1 {
                out.push(ListEdit::Replace {
                    pos: head + i,
                    item: b.clone(),
                });
                now[head + i] = b.clone();
            }
        }
        if !out.is_empty() {
            out.extend(edits(&now, declared));
            return out;
        }
    }
    let in_place = old.len() == new.len()
        && (old.len() == 1 || old.iter().zip(new).all(|(a, b)| a.neutral(b)));
    if in_place {
        for (i, (a, b)) in old.iter().zip(new).enumerate() {
            if a != b {
                out.push(ListEdit::Replace {
                    pos: head + i,
                    item: b.clone(),
                });
            }
        }
        return out;
    }
    for item in new.iter().rev() {
        out.push(ListEdit::Insert {
            item: item.inactive(),
        });
        if head > 0 {
            out.push(ListEdit::Move { from: 0, to: head });
        }
    }
    for (i, item) in new.iter().enumerate() {
        if item.active() {
            out.push(ListEdit::Replace {
                pos: head + i,
                item: item.clone(),
            });
        }
    }
    for j in (0..old.len()).rev() {
        out.push(ListEdit::Delete {
            pos: head + new.len() + j,
        });
    }
    out
}

/// Applies `edits` to `list` as PVE does.
pub fn apply<T: Clone>(list: &mut Vec<T>, edits: &[ListEdit<T>]) {
    for e in edits {
        match e {
            ListEdit::Insert { item } => list.insert(0, item.clone()),
            ListEdit::Move { from, to } => {
                let item = list.remove(*from);
                list.insert(*to, item);
            }
            ListEdit::Replace { pos, item } => list[*pos] = item.clone(),
            ListEdit::Delete { pos } => {
                list.remove(*pos);
            }
        }
    }
}

/// Turns the list into `declared` by the module's script: each edit after a read that shows
/// the list as the script left it, with that read's digest.
///
/// # Errors
///
/// `changed` when the list moved under the writer (a read shows anything else, or PVE
/// answers that a position holds no entry); the edit's failure otherwise.
pub async fn write<L: OrderedList>(
    list: &L,
    client: &Client,
    declared: &[L::Item],
) -> Result<usize, Failure> {
    let first = list.read(client).await?;
    let script = edits(&first.items, declared);
    let mut now = first.items;
    let mut digest = first.digest;
    for (n, edit) in script.iter().enumerate() {
        if n > 0 {
            let read = list.read(client).await?;
            if read.items != now {
                return Err(Failure::new(
                    ErrorKind::Changed,
                    format!(
                        "{} changed while they were being written (after {n} of {} steps); nothing more is sent: plan again",
                        list.what(),
                        script.len()
                    ),
                ));
            }
            digest = read.digest;
        }
        list.send(client, edit, &now, &digest).await?;
        apply(&mut now, std::slice::from_ref(edit));
    }
    Ok(script.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule of a toy firewall: it matches the packets in `lo..=hi`, and says `action`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct R {
        lo: u8,
        hi: u8,
        action: u8,
        on: bool,
        note: u8,
    }

    impl fmt::Display for R {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "{}{}-{}:{}",
                ["|", ""][usize::from(self.on)],
                self.lo,
                self.hi,
                self.action
            )
        }
    }

    impl Entry for R {
        fn active(&self) -> bool {
            self.on
        }
        fn inactive(&self) -> Self {
            R {
                on: false,
                ..self.clone()
            }
        }
        fn neutral(&self, other: &Self) -> bool {
            (!self.on && !other.on)
                || R {
                    note: 0,
                    ..self.clone()
                } == R {
                    note: 0,
                    ..other.clone()
                }
        }
    }

    /// The decision of a list for a packet: the first enabled match, else the policy (0).
    fn decide(list: &[R], packet: u8) -> u8 {
        list.iter()
            .find(|r| r.on && r.lo <= packet && packet <= r.hi)
            .map_or(0, |r| r.action)
    }

    /// A small deterministic generator (no dependency for a test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
        fn rule(&mut self) -> R {
            let lo = self.next(8) as u8;
            R {
                lo,
                hi: lo + self.next(4) as u8,
                action: 1 + self.next(3) as u8,
                on: self.next(5) != 0,
                note: self.next(2) as u8,
            }
        }
        fn list(&mut self, pool: &[R]) -> Vec<R> {
            (0..self.next(7))
                .map(|_| match self.next(3) {
                    0 => self.rule(),
                    _ => pool[self.next(pool.len() as u64) as usize].clone(),
                })
                .collect()
        }
    }

    #[test]
    fn s33_no_intermediate_list_decides_a_packet_as_neither_the_old_nor_the_new_list() {
        let mut g = Lcg(7);
        let mut steps = 0;
        for _ in 0..20_000 {
            let pool: Vec<R> = (0..6).map(|_| g.rule()).collect();
            let old = g.list(&pool);
            let new = g.list(&pool);
            let script = edits(&old, &new);
            let mut now = old.clone();
            for e in &script {
                apply(&mut now, std::slice::from_ref(e));
                steps += 1;
                for p in 0..12 {
                    let d = decide(&now, p);
                    assert!(
                        d == decide(&old, p) || d == decide(&new, p),
                        "packet {p} decided {d} after {e} in {old:?} -> {new:?} by {script:?}"
                    );
                }
            }
            assert_eq!(now, new, "{old:?} -> {new:?} by {script:?}");
        }
        assert!(steps > 50_000, "{steps} steps checked");
    }

    #[test]
    fn s33_the_removals_first_script_it_replaces_opens_what_neither_list_opens() {
        // Old: drop 5, then accept all; new: reject 5, accept all. Deleting the drop before
        // the reject is in place accepts 5 for a while: neither list's decision.
        let drop5 = R {
            lo: 5,
            hi: 5,
            action: 2,
            on: true,
            note: 0,
        };
        let reject5 = R {
            lo: 5,
            hi: 5,
            action: 3,
            on: true,
            note: 0,
        };
        let all = R {
            lo: 0,
            hi: 11,
            action: 1,
            on: true,
            note: 0,
        };
        let old = vec![drop5.clone(), all.clone()];
        let new = vec![reject5.clone(), all.clone()];
        assert_eq!(decide(std::slice::from_ref(&all), 5), 1);
        let script = edits(&old, &new);
        // One entry each side: replaced in place, one atomic write.
        assert_eq!(
            script,
            [ListEdit::Replace {
                pos: 0,
                item: reject5.clone()
            }]
        );
        // Two changed entries go through the disabled inserts.
        let old = vec![drop5.clone(), drop5.clone(), all.clone()];
        let new = vec![reject5.clone(), reject5.clone(), all];
        let script = edits(&old, &new);
        assert_eq!(script.len(), 2 + 2 + 2, "{script:?}");
        assert!(matches!(script[0], ListEdit::Insert { ref item } if !item.on));
    }

    #[test]
    fn s06_a_list_that_matches_plans_no_edit_and_comments_change_in_place() {
        let a = R {
            lo: 1,
            hi: 2,
            action: 1,
            on: true,
            note: 0,
        };
        let b = R {
            lo: 3,
            hi: 4,
            action: 2,
            on: true,
            note: 0,
        };
        assert!(edits(&[a.clone(), b.clone()], &[a.clone(), b.clone()]).is_empty());
        assert!(edits::<R>(&[], &[]).is_empty());
        let a2 = R {
            note: 1,
            ..a.clone()
        };
        let b2 = R {
            note: 1,
            ..b.clone()
        };
        assert_eq!(
            edits(&[a.clone(), b.clone()], &[a2.clone(), b2.clone()]),
            [
                ListEdit::Replace { pos: 0, item: a2 },
                ListEdit::Replace { pos: 1, item: b2 }
            ]
        );
        // An entry added under the head: inserted disabled, moved below it, enabled.
        let c = R {
            lo: 9,
            hi: 9,
            action: 3,
            on: true,
            note: 0,
        };
        assert_eq!(
            edits(&[a.clone(), b.clone()], &[a.clone(), c.clone(), b.clone()]),
            [
                ListEdit::Insert { item: c.inactive() },
                ListEdit::Move { from: 0, to: 1 },
                ListEdit::Replace { pos: 1, item: c }
            ]
        );
        // Removed: one delete.
        assert_eq!(
            edits(&[a.clone(), b.clone()], &[b]),
            [ListEdit::Delete { pos: 0 }]
        );
    }

    #[test]
    fn moveto_names_the_entry_pve_puts_the_moved_one_before() {
        // pve-firewall Rules.pm update_rule: the entry goes before the one that was at moveto.
        let pve = |list: &[u8], pos: usize, moveto: usize| -> Vec<u8> {
            let rule = list[pos];
            let mut out = Vec::new();
            for (i, r) in list.iter().enumerate() {
                if i == pos {
                    continue;
                }
                if i == moveto {
                    out.push(rule);
                }
                out.push(*r);
            }
            if moveto >= list.len() {
                out.push(rule);
            }
            out
        };
        let list = [0u8, 1, 2, 3, 4];
        for from in 0..5 {
            for to in 0..5 {
                if from == to {
                    continue;
                }
                let mut ours = list.to_vec();
                apply(&mut ours, &[ListEdit::<u8>::Move { from, to }]);
                assert_eq!(pve(&list, from, moveto(from, to)), ours, "{from}->{to}");
            }
        }
    }
}
