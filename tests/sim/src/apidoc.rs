//! `/pve-docs/api-viewer/apidoc.js`, rebuilt from the facts table: the API tree as PVE's viewer
//! file holds it (assigned to `apiSchema`), each method with its facts and no prose.
//!
//! The table's lines are the schema's nodes in tree order with their depth; nesting them again
//! and dropping our two keys (`depth`, `since`) gives the schema the table was generated from,
//! prose aside, so `pve-codegen import` of this file generates the committed SDK (the test is
//! `tests/tests/upgrade_flow.rs`). Methods newer than the release played are left out, as that
//! release's viewer would not list them; their nodes stay (parameters stay 9.2's, see
//! [`crate::version`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::facts::{tree, TreeNode};
use crate::version::PveVersion;

/// The viewer file's text for `version` (built once per release).
pub fn apidoc_js(version: &PveVersion) -> &'static str {
    static TEXTS: OnceLock<Mutex<BTreeMap<String, &'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // One entry per release (`9.1`): a handful at most, so leaking each text is bounded.
    texts
        .entry(version.release())
        .or_insert_with(|| Box::leak(build(version).into_boxed_str()))
}

fn node(n: &TreeNode, version: &PveVersion) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("path".into(), Value::from(n.path.clone()));
    m.insert("text".into(), Value::from(n.text.clone()));
    m.insert("leaf".into(), Value::from(u8::from(n.leaf)));
    let info: Map<String, Value> = n
        .info
        .iter()
        .filter(|(verb, _)| n.since.get(*verb).is_none_or(|s| version.has(s)))
        .map(|(verb, v)| (verb.clone(), v.clone()))
        .collect();
    if !info.is_empty() {
        m.insert("info".into(), Value::Object(info));
    }
    m
}

/// Nests the lines at `depth` starting at `*i`, each with the deeper lines that follow it.
fn nest(lines: &[TreeNode], i: &mut usize, depth: usize, version: &PveVersion) -> Vec<Value> {
    let mut out = Vec::new();
    while *i < lines.len() && lines[*i].depth == depth {
        let mut m = node(&lines[*i], version);
        *i += 1;
        let children = nest(lines, i, depth + 1, version);
        if !children.is_empty() {
            m.insert("children".into(), Value::Array(children));
        }
        out.push(Value::Object(m));
    }
    out
}

fn build(version: &PveVersion) -> String {
    let lines = tree();
    let mut i = 0;
    let roots = nest(lines, &mut i, 0, version);
    // The generator writes every line at a depth at most one below the line before; a line
    // that does not nest is a build defect the tests catch.
    assert_eq!(i, lines.len(), "facts.json: line {i} does not nest");
    format!(
        "// API viewer data rebuilt by pve-sim from its schema facts (PVE {version})\nconst apiSchema = {};\n\nExt.onReady(function() {{}});\n",
        Value::Array(roots)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_release_lists_fewer_methods_on_the_same_nodes() {
        let count = |js: &str| js.matches("\"allowtoken\":").count();
        let newest = apidoc_js(&PveVersion::NEWEST);
        let oldest = apidoc_js(&PveVersion::OLDEST);
        assert_eq!(count(newest), crate::facts::operations().len());
        let in_8_4 = crate::facts::operations()
            .iter()
            .filter(|op| {
                op.since
                    .as_deref()
                    .is_none_or(|s| PveVersion::OLDEST.has(s))
            })
            .count();
        assert!(in_8_4 < count(newest));
        assert_eq!(count(oldest), in_8_4);
        assert_eq!(
            newest.matches("\"leaf\":").count(),
            oldest.matches("\"leaf\":").count()
        );
        assert!(std::ptr::eq(newest, apidoc_js(&PveVersion::new(9, 2, 3))));
    }
}
