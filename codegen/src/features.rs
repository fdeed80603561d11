//! Cargo features of the generated SDK: one per top-level path (`nodes`, `cluster`, ...) and,
//! below the tops that have them, one per first fixed path segment under it (`nodes-qemu` for
//! `/nodes/{node}/qemu/...`, `cluster-sdn` for `/cluster/sdn/...`). A top's feature is the union
//! of its second-level ones; the operations on the top's own paths (`GET /nodes`,
//! `GET /nodes/{node}`) and the types shared below it are compiled with any of them.
//!
//! The generator writes the `[features]` entries into the SDK's `Cargo.toml` between two marker
//! lines ([`BEGIN`], [`END`]), so the features always match the modules of the schema generated.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::TokenStream;
use quote::quote;

use crate::ir::{Api, ModPath};

/// Top-level modules that have a cargo feature of the same name.
pub const TOPS: &[&str] = &["access", "cluster", "nodes", "pools", "storage", "version"];

/// The line before the generated feature entries in `Cargo.toml`.
pub const BEGIN: &str = "# @generated features begin (pve-codegen writes this block; do not edit)";
/// The line after them.
pub const END: &str = "# @generated features end";

/// The feature an operation on `path` belongs to: `nodes-qemu` for `/nodes/{node}/qemu/{vmid}`,
/// `nodes` for `/nodes/{node}`, `None` outside the tops.
pub fn op_feature(path: &str) -> Option<String> {
    let mut segs = path.split('/').filter(|s| !s.is_empty());
    let top = segs.next()?;
    if !TOPS.contains(&top) {
        return None;
    }
    match segs.find(|s| !s.starts_with('{')) {
        Some(seg) => Some(format!(
            "{top}-{}",
            seg.to_ascii_lowercase().replace('_', "-")
        )),
        None => Some(top.to_owned()),
    }
}

/// The features of an API: each top with its second-level features (empty for a top with none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// Top -> its second-level features.
    pub tops: BTreeMap<String, BTreeSet<String>>,
    /// Module path -> the features of the operations in it and below it.
    pub subtree: BTreeMap<ModPath, BTreeSet<String>>,
    /// No per-path features (PBS: its whole module is the one feature `pbs`, and its paths
    /// must not take PVE's feature names).
    pub off: bool,
}

impl Features {
    /// The features of `api`'s operations.
    pub fn of(api: &Api) -> Features {
        if api.dialect == crate::raw::Dialect::Pbs {
            return Features {
                off: true,
                ..Features::default()
            };
        }
        let mut f = Features::default();
        for top in TOPS {
            f.tops.insert((*top).to_owned(), BTreeSet::new());
        }
        for (path, module) in &api.modules {
            for op in &module.ops {
                let Some(feat) = op_feature(&op.path) else {
                    continue;
                };
                let top = op
                    .path
                    .split('/')
                    .find(|s| !s.is_empty())
                    .unwrap_or_default();
                if feat != top {
                    f.tops
                        .entry(top.to_owned())
                        .or_default()
                        .insert(feat.clone());
                }
                for n in 0..=path.len() {
                    f.subtree
                        .entry(path[..n].to_vec())
                        .or_default()
                        .insert(feat.clone());
                }
            }
        }
        f
    }

    /// The smallest list of features any of which compiles code needing `set`: a top with
    /// second-level features stands for them (it is their union).
    fn reduce(&self, set: &BTreeSet<String>) -> Vec<String> {
        let mut out = BTreeSet::new();
        for feat in set {
            match self.tops.get(feat) {
                Some(subs) if !subs.is_empty() => out.extend(subs.iter().cloned()),
                _ => {
                    out.insert(feat.clone());
                }
            }
        }
        out.into_iter().collect()
    }

    /// `#[cfg(...)]` for code needed by any of `set`, or nothing for an empty set.
    pub fn cfg(&self, set: &BTreeSet<String>) -> TokenStream {
        if self.off {
            return quote!();
        }
        let feats = self.reduce(set);
        match feats.as_slice() {
            [] => quote!(),
            [one] => quote!(#[cfg(feature = #one)]),
            many => quote!(#[cfg(any(#(feature = #many),*))]),
        }
    }

    /// The `#[cfg]` of the declaration of module `child` inside module `parent`: none when the
    /// child needs what the parent needs (it is already gated).
    pub fn module_cfg(&self, parent: &ModPath, child: &str) -> TokenStream {
        let mut path = parent.clone();
        path.push(child.to_owned());
        let empty = BTreeSet::new();
        let mine = self.subtree.get(&path).unwrap_or(&empty);
        if !parent.is_empty() && self.subtree.get(parent) == Some(mine) {
            return quote!();
        }
        self.cfg(mine)
    }

    /// How many features there are (tops and second-level ones).
    pub fn count(&self) -> usize {
        self.tops.len() + self.tops.values().map(BTreeSet::len).sum::<usize>()
    }

    /// The `Cargo.toml` entries, between the markers.
    pub fn cargo_block(&self) -> String {
        let mut out = String::new();
        out.push_str(BEGIN);
        out.push('\n');
        for (top, subs) in &self.tops {
            let list: Vec<String> = subs.iter().map(|s| format!("\"{s}\"")).collect();
            if list.is_empty() {
                out.push_str(&format!("{top} = []\n"));
            } else {
                out.push_str(&format!("{top} = [{}]\n", list.join(", ")));
            }
        }
        for subs in self.tops.values() {
            for s in subs {
                out.push_str(&format!("{s} = []\n"));
            }
        }
        out.push_str(END);
        out
    }
}

/// `manifest` with its feature block replaced by `block`.
///
/// # Errors
///
/// The manifest has no block (each marker exactly once, begin before end).
pub fn splice(manifest: &str, block: &str) -> Result<String, String> {
    let begin = manifest
        .match_indices(BEGIN)
        .map(|(i, _)| i)
        .collect::<Vec<_>>();
    let end = manifest
        .match_indices(END)
        .map(|(i, _)| i)
        .collect::<Vec<_>>();
    match (begin.as_slice(), end.as_slice()) {
        ([b], [e]) if b < e => Ok(format!(
            "{}{block}{}",
            &manifest[..*b],
            &manifest[e + END.len()..]
        )),
        _ => Err(format!(
            "no generated feature block: the manifest needs the line `{BEGIN}` and, after it, \
             the line `{END}`, once each"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_belongs_to_the_first_fixed_segment_below_its_top() {
        assert_eq!(
            op_feature("/nodes/{node}/qemu/{vmid}/config").as_deref(),
            Some("nodes-qemu")
        );
        assert_eq!(op_feature("/nodes/{node}").as_deref(), Some("nodes"));
        assert_eq!(op_feature("/nodes").as_deref(), Some("nodes"));
        assert_eq!(
            op_feature("/cluster/sdn/zones").as_deref(),
            Some("cluster-sdn")
        );
        assert_eq!(
            op_feature("/nodes/{node}/query_url_metadata").as_deref(),
            Some("nodes-query-url-metadata")
        );
        assert_eq!(op_feature("/storage/{storage}").as_deref(), Some("storage"));
        assert_eq!(op_feature("/elsewhere/x"), None);
        assert_eq!(op_feature("/"), None);
    }

    #[test]
    fn splice_replaces_exactly_the_block_or_refuses() {
        let m = format!("[features]\ndefault = [\"a\"]\n{BEGIN}\nold = []\n{END}\nblocking = []\n");
        let got = splice(&m, &format!("{BEGIN}\nnew = []\n{END}")).expect("spliced");
        assert_eq!(
            got,
            format!("[features]\ndefault = [\"a\"]\n{BEGIN}\nnew = []\n{END}\nblocking = []\n")
        );
        assert!(splice("[features]\n", "x").is_err());
        assert!(
            splice(&format!("{END}\n{BEGIN}\n"), "x").is_err(),
            "end before begin"
        );
        assert!(
            splice(&format!("{BEGIN}\n{BEGIN}\n{END}\n"), "x").is_err(),
            "twice"
        );
    }
}
