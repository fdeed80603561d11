//! `diff`: the upgrade report between two schemas, each change classed for a caller of the SDK.
//!
//! Breaking: an operation, parameter, response field, enum value or property-string key that a
//! caller may use disappears; a parameter becomes required (or stops being required: the
//! generated field's type changes); a type changes; a range or length narrows. Compatible:
//! additions of optional things, widened ranges, new enum values (enums are open).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::raw::{Format, Schema, Spec};

/// A change's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Code that compiled and worked against the old SDK may not.
    Breaking,
    /// Existing callers are unaffected.
    Compatible,
}

/// One change inside an operation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Change {
    /// Breaking or compatible.
    pub class: Class,
    /// `param "maxfiles"`, `returns "status"`, `returns`.
    pub what: String,
    /// What happened, e.g. `removed`, `made required`, `enum: added "x"`.
    pub change: String,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Old schema file.
    pub old: String,
    /// New schema file.
    pub new: String,
    /// Operations only in the new schema.
    pub added: Vec<String>,
    /// Operations only in the old schema.
    pub removed: Vec<String>,
    /// Changes per operation present in both.
    pub changed: BTreeMap<String, Vec<Change>>,
    /// Per family of `pve-resources` (`patches/families.toml`, when given): what a declaration
    /// gains or loses.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub families: BTreeMap<String, Vec<Change>>,
}

impl Report {
    /// Number of breaking changes, removed operations included.
    pub fn breaking(&self) -> usize {
        self.removed.len()
            + self
                .changed
                .values()
                .flatten()
                .filter(|c| c.class == Class::Breaking)
                .count()
    }

    /// Number of compatible changes, added operations included.
    pub fn compatible(&self) -> usize {
        self.added.len()
            + self
                .changed
                .values()
                .flatten()
                .filter(|c| c.class == Class::Compatible)
                .count()
    }
}

fn ops(spec: &Spec) -> BTreeMap<String, (&Schema, &Schema)> {
    spec.operations()
        .into_iter()
        .map(|(n, m)| {
            (
                format!("{} {}", m.verb, n.path),
                (&m.parameters, &m.returns),
            )
        })
        .collect()
}

/// The request type name of every operation, as the generator names it.
fn type_names(spec: &Spec) -> BTreeMap<String, String> {
    spec.operations()
        .into_iter()
        .map(|(n, m)| {
            (
                format!("{} {}", m.verb, n.path),
                crate::names::op_type_name(&m.name, &n.path),
            )
        })
        .collect()
}

/// Compares two schemas.
pub fn diff(old: &Spec, new: &Spec) -> Report {
    let a = ops(old);
    let b = ops(new);
    let added = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    let removed = a.keys().filter(|k| !b.contains_key(*k)).cloned().collect();
    let mut changed = BTreeMap::new();
    let (names_a, names_b) = (type_names(old), type_names(new));
    for (key, (pa, ra)) in &a {
        let Some((pb, rb)) = b.get(key) else { continue };
        let mut out = Vec::new();
        if let (Some(na), Some(nb)) = (names_a.get(key), names_b.get(key)) {
            if na != nb {
                // The handler was renamed: so are the request, response and error types.
                out.push(Change {
                    class: Class::Breaking,
                    what: "type".to_owned(),
                    change: format!("renamed {na} -> {nb} (and its Response and Error types)"),
                });
            }
        }
        let empty = BTreeMap::new();
        let props_a = pa.properties.as_ref().unwrap_or(&empty);
        let props_b = pb.properties.as_ref().unwrap_or(&empty);
        for (name, sa) in props_a {
            let what = format!("param \"{name}\"");
            match props_b.get(name) {
                None => out.push(Change {
                    class: Class::Breaking,
                    what,
                    change: "removed".into(),
                }),
                Some(sb) => {
                    if sa.optional && !sb.optional {
                        out.push(Change {
                            class: Class::Breaking,
                            what: what.clone(),
                            change: "made required".into(),
                        });
                    } else if !sa.optional && sb.optional {
                        out.push(Change {
                            class: Class::Breaking,
                            what: what.clone(),
                            change: "made optional (the field becomes an Option)".into(),
                        });
                    }
                    compare(&what, sa, sb, true, &mut out);
                }
            }
        }
        for (name, sb) in props_b {
            if !props_a.contains_key(name) {
                out.push(Change {
                    class: if sb.optional {
                        Class::Compatible
                    } else {
                        Class::Breaking
                    },
                    what: format!("param \"{name}\""),
                    change: if sb.optional {
                        "added (optional)".into()
                    } else {
                        "added (required)".into()
                    },
                });
            }
        }
        compare("returns", ra, rb, false, &mut out);
        if !out.is_empty() {
            out.sort();
            changed.insert(key.clone(), out);
        }
    }
    Report {
        old: old.file_name.clone(),
        new: new.file_name.clone(),
        added,
        removed,
        changed,
        families: BTreeMap::new(),
    }
}

/// What each family's declaration gains or loses from `old` to `new`: a field its create
/// takes now (managed, or create-only when the update does not take it: a live difference is
/// then refused, S18), a field it no longer takes (a declaration that sets it stops building),
/// a field that becomes create-only or updatable, an operation that is gone. The ids are the
/// parameters all four operations take.
pub fn families(
    old: &Spec,
    new: &Spec,
    families: &[crate::patch::FamilyOps],
) -> BTreeMap<String, Vec<Change>> {
    let (a, b) = (ops(old), ops(new));
    let names =
        |ops: &BTreeMap<String, (&Schema, &Schema)>, op: &str| -> Option<BTreeSet<String>> {
            let (params, _) = ops.get(op)?;
            Some(
                params
                    .properties
                    .iter()
                    .flatten()
                    .map(|(k, _)| k.clone())
                    .collect(),
            )
        };
    let mut out = BTreeMap::new();
    for f in families {
        let mut changes = Vec::new();
        let mut push = |class, what: String, change: &str| {
            changes.push(Change {
                class,
                what,
                change: change.to_owned(),
            });
        };
        let four = [&f.create, &f.read, &f.update, &f.delete];
        let gone: Vec<&&String> = four
            .iter()
            .filter(|op| !b.contains_key(op.as_str()))
            .collect();
        for op in &gone {
            push(
                Class::Breaking,
                format!("operation \"{op}\""),
                "removed: the family cannot work",
            );
        }
        let sides = |ops| -> Option<(BTreeSet<String>, BTreeSet<String>, BTreeSet<String>)> {
            let create = names(ops, &f.create)?;
            let update = names(ops, &f.update)?;
            let mut ids = create.clone();
            for op in [&f.read, &f.update, &f.delete] {
                let n = names(ops, op)?;
                ids.retain(|k| n.contains(k));
            }
            Some((create, update, ids))
        };
        if let (Some((ca, ua, ids)), Some((cb, ub, _))) = (sides(&a), sides(&b)) {
            for k in cb.difference(&ca).filter(|k| !ids.contains(*k)) {
                let what = format!("field \"{k}\"");
                match ub.contains(k) {
                    true => push(Class::Compatible, what, "added: managed when declared"),
                    false => push(
                        Class::Compatible,
                        what,
                        "added, create-only (the update does not take it: a live difference is refused)",
                    ),
                }
            }
            for k in ca.difference(&cb).filter(|k| !ids.contains(*k)) {
                push(
                    Class::Breaking,
                    format!("field \"{k}\""),
                    "removed: a declaration that sets it no longer builds",
                );
            }
            for k in ca.intersection(&cb).filter(|k| !ids.contains(*k)) {
                let what = format!("field \"{k}\"");
                match (ua.contains(k), ub.contains(k)) {
                    (true, false) => push(
                        Class::Breaking,
                        what,
                        "became create-only: a declared change is now refused, never written",
                    ),
                    (false, true) => push(Class::Compatible, what, "became updatable"),
                    _ => {}
                }
            }
        }
        if !changes.is_empty() {
            changes.sort();
            out.insert(f.kind.clone(), changes);
        }
    }
    out
}

fn type_name(s: &Schema) -> String {
    let base = s.ty.clone().unwrap_or_else(|| {
        if s.properties.is_some() {
            "object".into()
        } else if s.items.is_some() {
            "array".into()
        } else {
            "untyped".into()
        }
    });
    match (&s.format, s.enum_values.is_some()) {
        (Some(Format::Inline(_)), _) => format!("{base} (property string)"),
        (_, true) => format!("{base} (enum)"),
        _ => base,
    }
}

/// Compares two schemas at `what`; `input` says whether callers send it (params) or read it.
fn compare(what: &str, a: &Schema, b: &Schema, input: bool, out: &mut Vec<Change>) {
    let push = |out: &mut Vec<Change>, class, change: String| {
        out.push(Change {
            class,
            what: what.to_owned(),
            change,
        })
    };
    let (ta, tb) = (type_name(a), type_name(b));
    if ta != tb {
        push(out, Class::Breaking, format!("type {ta} -> {tb}"));
        return;
    }
    if let (Some(ea), Some(eb)) = (&a.enum_values, &b.enum_values) {
        let sa: BTreeSet<&String> = ea.iter().collect();
        let sb: BTreeSet<&String> = eb.iter().collect();
        for v in sa.difference(&sb) {
            push(out, Class::Breaking, format!("enum value \"{v}\" removed"));
        }
        for v in sb.difference(&sa) {
            push(out, Class::Compatible, format!("enum value \"{v}\" added"));
        }
    }
    // Ranges and lengths: narrowing refuses values that worked before.
    let bound =
        |out: &mut Vec<Change>, name: &str, old: Option<f64>, new: Option<f64>, lower: bool| {
            if old == new {
                return;
            }
            let narrowed = match (old, new) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(o), Some(n)) => {
                    if lower {
                        n > o
                    } else {
                        n < o
                    }
                }
                (None, None) => false,
            };
            let class = if narrowed && input {
                Class::Breaking
            } else {
                Class::Compatible
            };
            let show = |v: Option<f64>| v.map_or("none".to_owned(), |v| v.to_string());
            push(out, class, format!("{name} {} -> {}", show(old), show(new)));
        };
    bound(out, "minimum", a.minimum, b.minimum, true);
    bound(out, "maximum", a.maximum, b.maximum, false);
    bound(
        out,
        "minLength",
        a.min_length.map(|v| v as f64),
        b.min_length.map(|v| v as f64),
        true,
    );
    bound(
        out,
        "maxLength",
        a.max_length.map(|v| v as f64),
        b.max_length.map(|v| v as f64),
        false,
    );
    if let (Some(Format::Inline(ka)), Some(Format::Inline(kb))) = (&a.format, &b.format) {
        for k in ka.keys() {
            if !kb.contains_key(k) {
                push(
                    out,
                    Class::Breaking,
                    format!("property-string key \"{k}\" removed"),
                );
            }
        }
        for (k, s) in kb {
            if !ka.contains_key(k) {
                let class = if s.optional || !input {
                    Class::Compatible
                } else {
                    Class::Breaking
                };
                push(out, class, format!("property-string key \"{k}\" added"));
            }
        }
    }
    match (&a.properties, &b.properties) {
        (Some(pa), Some(pb)) => {
            for (k, sa) in pa {
                let w = format!("{what} \"{k}\"");
                match pb.get(k) {
                    None => out.push(Change {
                        class: Class::Breaking,
                        what: w,
                        change: "removed".into(),
                    }),
                    Some(sb) => compare(&w, sa, sb, input, out),
                }
            }
            for k in pb.keys() {
                if !pa.contains_key(k) {
                    out.push(Change {
                        class: Class::Compatible,
                        what: format!("{what} \"{k}\""),
                        change: "added".into(),
                    });
                }
            }
        }
        (None, Some(_)) if !input => {
            push(out, Class::Compatible, "now has typed properties".into())
        }
        (Some(_), None) if !input => push(out, Class::Breaking, "lost its properties".into()),
        _ => {}
    }
    if let (Some(ia), Some(ib)) = (&a.items, &b.items) {
        compare(&format!("{what} items"), ia, ib, input, out);
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} -> {}: {} operations added, {} removed, {} changed; {} breaking, {} compatible changes",
            self.old,
            self.new,
            self.added.len(),
            self.removed.len(),
            self.changed.len(),
            self.breaking(),
            self.compatible()
        )?;
        if !self.removed.is_empty() {
            writeln!(f, "\nremoved operations (breaking):")?;
            for k in &self.removed {
                writeln!(f, "  {k}")?;
            }
        }
        if !self.added.is_empty() {
            writeln!(f, "\nadded operations (compatible):")?;
            for k in &self.added {
                writeln!(f, "  {k}")?;
            }
        }
        if !self.families.is_empty() {
            writeln!(f, "\nfamilies (what a declaration gains or loses):")?;
            for (k, changes) in &self.families {
                writeln!(f, "  {k}")?;
                for c in changes {
                    let class = match c.class {
                        Class::Breaking => "breaking  ",
                        Class::Compatible => "compatible",
                    };
                    writeln!(f, "    {class} {}: {}", c.what, c.change)?;
                }
            }
        }
        if !self.changed.is_empty() {
            writeln!(f, "\nchanged operations:")?;
            for (k, changes) in &self.changed {
                writeln!(f, "  {k}")?;
                for c in changes {
                    let class = match c.class {
                        Class::Breaking => "breaking  ",
                        Class::Compatible => "compatible",
                    };
                    writeln!(f, "    {class} {}: {}", c.what, c.change)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod rename_tests {
    use super::*;

    fn spec(handler: &str) -> Spec {
        let text = format!(
            r#"[{{"path":"/things","text":"things","leaf":1,"info":{{"GET":{{"name":"{handler}","method":"GET","parameters":{{"type":"object","properties":{{}}}},"returns":{{"type":"null"}}}}}}}}]"#
        );
        crate::raw::parse("t.json", text.as_bytes()).expect("parses")
    }

    #[test]
    fn a_renamed_handler_is_a_breaking_type_rename() {
        // `list_things` and `index` on /things both read ListThings: no rename, no entry.
        let r = diff(&spec("list_things"), &spec("index"));
        assert!(!r.changed.contains_key("GET /things"), "{:?}", r.changed);
        let r = diff(&spec("read_things"), &spec("index"));
        assert_eq!(
            r.changed["GET /things"],
            [Change {
                class: Class::Breaking,
                what: "type".to_owned(),
                change: "renamed ReadThings -> ListThings (and its Response and Error types)"
                    .to_owned(),
            }]
        );
        assert_eq!(r.breaking(), 1);
    }
}

#[cfg(test)]
mod family_tests {
    use super::*;
    use crate::patch::FamilyOps;

    /// `/things` (create, list) and `/things/{id}` (read, update, delete), the create taking
    /// `create` and the update `update` besides the id.
    fn spec(create: &[&str], update: &[&str]) -> Spec {
        let props = |names: &[&str]| {
            let mut m = serde_json::Map::new();
            m.insert("id".into(), serde_json::json!({"type": "string"}));
            for n in names {
                m.insert(
                    (*n).into(),
                    serde_json::json!({"type": "string", "optional": 1}),
                );
            }
            serde_json::json!({"type": "object", "properties": m})
        };
        let method = |verb: &str, name: &str, params: serde_json::Value| serde_json::json!({"name": name, "method": verb, "parameters": params, "returns": {"type": "null"}});
        let id_only = props(&[]);
        let tree = serde_json::json!([{
            "path": "/things", "text": "things",
            "info": {"POST": method("POST", "create_thing", props(create))},
            "children": [{
                "path": "/things/{id}", "text": "{id}", "leaf": 1,
                "info": {
                    "GET": method("GET", "read_thing", id_only.clone()),
                    "PUT": method("PUT", "update_thing", props(update)),
                    "DELETE": method("DELETE", "delete_thing", id_only),
                }
            }]
        }]);
        crate::raw::parse("t.json", tree.to_string().as_bytes()).expect("parses")
    }

    fn thing() -> FamilyOps {
        FamilyOps {
            kind: "thing".into(),
            create: "POST /things".into(),
            read: "GET /things/{id}".into(),
            update: "PUT /things/{id}".into(),
            delete: "DELETE /things/{id}".into(),
        }
    }

    fn shown(r: &BTreeMap<String, Vec<Change>>) -> Vec<String> {
        r.values()
            .flatten()
            .map(|c| format!("{:?} {}: {}", c.class, c.what, c.change))
            .collect()
    }

    #[test]
    fn a_release_s_field_changes_are_reported_per_family() {
        let old = spec(&["comment", "size", "gone"], &["comment", "size"]);
        let new = spec(&["comment", "size", "tag", "kind"], &["comment", "tag"]);
        let r = families(&old, &new, &[thing()]);
        assert_eq!(
            shown(&r),
            [
                "Breaking field \"gone\": removed: a declaration that sets it no longer builds",
                "Breaking field \"size\": became create-only: a declared change is now refused, never written",
                "Compatible field \"kind\": added, create-only (the update does not take it: a live difference is refused)",
                "Compatible field \"tag\": added: managed when declared",
            ]
        );
        assert!(families(&new, &new, &[thing()]).is_empty());
    }

    #[test]
    fn a_family_whose_operation_is_gone_is_breaking() {
        let old = spec(&["comment"], &["comment"]);
        let mut f = thing();
        f.update = "PUT /things/{id}/config".into();
        let r = families(&old, &old, &[f]);
        assert_eq!(
            shown(&r),
            ["Breaking operation \"PUT /things/{id}/config\": removed: the family cannot work"]
        );
    }
}
