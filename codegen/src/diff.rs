//! `diff`: the upgrade report between two schemas, each change classed twice: for Rust callers
//! of the SDK (`class`) and for PVE's wire (`wire`).
//!
//! Rust: breaking when code that compiled against the old SDK may not compile or read the same:
//! an operation, parameter, response field, enum value or property-string key disappears; a
//! parameter becomes required or stops being required (the field's type changes); a type
//! changes (an answer that was untyped becomes a struct); a request type is renamed (a new PVE
//! handler name, or a `names` patch). Compatible: additions of optional things, new enum values
//! (enums are open), ranges (the compiler does not see them).
//!
//! Wire: breaking when a request PVE accepted before may be refused now, or an answer field a
//! client read is gone: a removed or newly required parameter, a removed enum value or key of a
//! request, a narrowed range or length, a changed type, a removed answer field. A rename, a
//! parameter that became optional, or an answer that gained or lost its schema's description
//! of its properties leaves the bytes as they were.

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
    /// Breaking or compatible for Rust callers of the SDK.
    pub class: Class,
    /// Breaking or compatible on PVE's wire: whether a request or answer that worked before
    /// still does.
    pub wire: Class,
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

    /// Number of changes that break PVE's wire (removed operations included).
    pub fn wire_breaking(&self) -> usize {
        self.removed.len()
            + self
                .changed
                .values()
                .flatten()
                .filter(|c| c.wire == Class::Breaking)
                .count()
    }

    /// Number of changes that break Rust callers but leave the wire as it was (renames, a
    /// parameter made optional, an answer now typed).
    pub fn rust_only(&self) -> usize {
        self.changed
            .values()
            .flatten()
            .filter(|c| c.class == Class::Breaking && c.wire == Class::Compatible)
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

/// The request type name of every operation, as the generator names it: the handler's name, or
/// the one a `names` patch gives (`renames`, by operation).
pub fn type_names(
    spec: &Spec,
    renames: &BTreeMap<String, (String, String)>,
) -> BTreeMap<String, String> {
    spec.operations()
        .into_iter()
        .map(|(n, m)| {
            let key = format!("{} {}", m.verb, n.path);
            let name = match renames.get(&key) {
                Some((name, _)) => name.clone(),
                None => crate::names::op_type_name(&m.name, &n.path),
            };
            (key, name)
        })
        .collect()
}

/// The request type of every operation of a generated SDK, from its index page (the table
/// at the top of `generated/mod.rs`): the names a user's code holds today.
///
/// # Errors
///
/// The file cannot be read or holds no index.
pub fn sdk_type_names(generated: &std::path::Path) -> Result<BTreeMap<String, String>, String> {
    let file = generated.join("mod.rs");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
    let names: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| {
            // `//! | GET | `/nodes/{node}/qemu` | [`ListVms`](...) |`
            let cells: Vec<&str> = l.strip_prefix("//! |")?.split('|').map(str::trim).collect();
            let [verb, path, ty, ..] = cells.as_slice() else {
                return None;
            };
            let path = path.strip_prefix('`')?.strip_suffix('`')?;
            let ty = ty.strip_prefix("[`")?.split('`').next()?;
            Some((format!("{verb} {path}"), ty.to_owned()))
        })
        .collect();
    if names.is_empty() {
        return Err(format!("{}: no operation index in it", file.display()));
    }
    Ok(names)
}

/// Compares two schemas, naming request types by their handlers.
pub fn diff(old: &Spec, new: &Spec) -> Report {
    let none = BTreeMap::new();
    diff_named(old, new, &type_names(old, &none), &type_names(new, &none))
}

/// Compares two schemas; a request type whose name differs between `old_names` and
/// `new_names` (by operation) is reported renamed.
pub fn diff_named(
    old: &Spec,
    new: &Spec,
    names_a: &BTreeMap<String, String>,
    names_b: &BTreeMap<String, String>,
) -> Report {
    let a = ops(old);
    let b = ops(new);
    let added = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    let removed = a.keys().filter(|k| !b.contains_key(*k)).cloned().collect();
    let mut changed = BTreeMap::new();
    for (key, (pa, ra)) in &a {
        let Some((pb, rb)) = b.get(key) else { continue };
        let mut out = Vec::new();
        if let (Some(na), Some(nb)) = (names_a.get(key), names_b.get(key)) {
            if na != nb {
                // The handler was renamed: so are the request, response and error types.
                out.push(Change {
                    class: Class::Breaking,
                    wire: Class::Compatible,
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
                    wire: Class::Breaking,
                    what,
                    change: "removed".into(),
                }),
                Some(sb) => {
                    if sa.optional && !sb.optional {
                        out.push(Change {
                            class: Class::Breaking,
                            wire: Class::Breaking,
                            what: what.clone(),
                            change: "made required".into(),
                        });
                    } else if !sa.optional && sb.optional {
                        out.push(Change {
                            class: Class::Breaking,
                            wire: Class::Compatible,
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
                let class = if sb.optional {
                    Class::Compatible
                } else {
                    Class::Breaking
                };
                out.push(Change {
                    class,
                    wire: class,
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
        // A declaration's field is not a wire fact: the two classes agree.
        let mut push = |class, what: String, change: &str| {
            changes.push(Change {
                class,
                wire: class,
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
    use Class::{Breaking, Compatible};
    let push = |out: &mut Vec<Change>, (class, wire): (Class, Class), change: String| {
        out.push(Change {
            class,
            wire,
            what: what.to_owned(),
            change,
        })
    };
    // What a client sends breaks the wire when PVE may refuse it now; what it reads, when it
    // is gone.
    let sent = if input { Breaking } else { Compatible };
    let (ta, tb) = (type_name(a), type_name(b));
    if ta != tb {
        let rust = (Breaking, Breaking);
        let answer_now_typed = !input && ta == "untyped";
        let answer_untyped = !input && tb == "untyped";
        let classes = if answer_now_typed || answer_untyped {
            (Breaking, Compatible)
        } else {
            rust
        };
        push(out, classes, format!("type {ta} -> {tb}"));
        return;
    }
    if let (Some(ea), Some(eb)) = (&a.enum_values, &b.enum_values) {
        let sa: BTreeSet<&String> = ea.iter().collect();
        let sb: BTreeSet<&String> = eb.iter().collect();
        for v in sa.difference(&sb) {
            push(out, (Breaking, sent), format!("enum value \"{v}\" removed"));
        }
        for v in sb.difference(&sa) {
            push(
                out,
                (Compatible, Compatible),
                format!("enum value \"{v}\" added"),
            );
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
            // The compiler does not see a range: Rust callers build as before, and PVE
            // refuses the values a narrowed range leaves out.
            let class = if narrowed && input {
                (Compatible, Breaking)
            } else {
                (Compatible, Compatible)
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
                    (Breaking, Breaking),
                    format!("property-string key \"{k}\" removed"),
                );
            }
        }
        for (k, s) in kb {
            if !ka.contains_key(k) {
                let class = if s.optional || !input {
                    Compatible
                } else {
                    Breaking
                };
                push(
                    out,
                    (class, class),
                    format!("property-string key \"{k}\" added"),
                );
            }
        }
    }
    match (&a.properties, &b.properties) {
        (Some(pa), Some(pb)) => {
            for (k, sa) in pa {
                let w = format!("{what} \"{k}\"");
                match pb.get(k) {
                    None => out.push(Change {
                        class: Breaking,
                        wire: Breaking,
                        what: w,
                        change: "removed".into(),
                    }),
                    Some(sb) => compare(&w, sa, sb, input, out),
                }
            }
            for k in pb.keys() {
                if !pa.contains_key(k) {
                    out.push(Change {
                        class: Compatible,
                        wire: Compatible,
                        what: format!("{what} \"{k}\""),
                        change: "added".into(),
                    });
                }
            }
        }
        // The answer's bytes are as they were; its Rust type is not.
        (None, Some(_)) if !input => push(
            out,
            (Breaking, Compatible),
            "now has typed properties (a struct where there was a map)".into(),
        ),
        (Some(_), None) if !input => {
            push(out, (Breaking, Compatible), "lost its properties".into())
        }
        _ => {}
    }
    if let (Some(ia), Some(ib)) = (&a.items, &b.items) {
        compare(&format!("{what} items"), ia, ib, input, out);
    }
}

fn label(c: &Change) -> &'static str {
    match (c.class, c.wire) {
        (Class::Breaking, Class::Breaking) => "breaks Rust and wire",
        (Class::Breaking, Class::Compatible) => "breaks Rust only   ",
        (Class::Compatible, Class::Breaking) => "breaks wire only   ",
        (Class::Compatible, Class::Compatible) => "compatible         ",
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
        writeln!(
            f,
            "Rust callers: {} changes break them ({} of them leave PVE's wire as it was); wire: {} changes break requests or answers that worked",
            self.breaking(),
            self.rust_only(),
            self.wire_breaking()
        )?;
        if !self.removed.is_empty() {
            writeln!(f, "\nremoved operations (break Rust and wire):")?;
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
                    writeln!(f, "    {} {}: {}", label(c), c.what, c.change)?;
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
                wire: Class::Compatible,
                what: "type".to_owned(),
                change: "renamed ReadThings -> ListThings (and its Response and Error types)"
                    .to_owned(),
            }]
        );
        assert_eq!(r.breaking(), 1);
        assert_eq!((r.rust_only(), r.wire_breaking()), (1, 0));
        assert!(
            r.to_string()
                .contains("breaks Rust only    type: renamed ReadThings -> ListThings"),
            "{r}"
        );
    }

    #[test]
    fn a_names_patch_is_a_rename_for_rust_callers_and_nothing_on_the_wire() {
        let s = spec("vmlist");
        let mut renames = BTreeMap::new();
        renames.insert(
            "GET /things".to_owned(),
            ("ListThings".to_owned(), "names.toml".to_owned()),
        );
        let r = diff_named(
            &s,
            &s,
            &type_names(&s, &BTreeMap::new()),
            &type_names(&s, &renames),
        );
        assert_eq!(
            r.changed["GET /things"][0].change,
            "renamed Vmlist -> ListThings (and its Response and Error types)"
        );
        assert_eq!((r.breaking(), r.rust_only(), r.wire_breaking()), (1, 1, 0));
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    fn spec(params: serde_json::Value, returns: serde_json::Value) -> Spec {
        let tree = serde_json::json!([{"path": "/things", "text": "things", "leaf": 1, "info": {
            "POST": {"name": "create_thing", "method": "POST",
                     "parameters": {"type": "object", "properties": params},
                     "returns": returns}}}]);
        crate::raw::parse("t.json", tree.to_string().as_bytes()).expect("parses")
    }

    fn classes(old: &Spec, new: &Spec) -> Vec<String> {
        diff(old, new)
            .changed
            .into_values()
            .flatten()
            .map(|c| format!("{} | {}: {}", label(&c).trim(), c.what, c.change))
            .collect()
    }

    #[test]
    fn each_change_is_classed_for_rust_callers_and_for_the_wire() {
        use serde_json::json;
        let old = spec(
            json!({
                "size": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "name": {"type": "string"},
                "gone": {"type": "string", "optional": 1},
            }),
            json!({"type": "object", "properties": {"id": {"type": "string"}, "old": {"type": "string"}}}),
        );
        let new = spec(
            json!({
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["a", "c"]},
                "name": {"type": "string", "optional": 1},
                "must": {"type": "string"},
            }),
            json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        );
        assert_eq!(
            classes(&old, &new),
            [
                "breaks Rust and wire | param \"gone\": removed",
                "breaks Rust and wire | param \"mode\": enum value \"b\" removed",
                "breaks Rust and wire | param \"must\": added (required)",
                "breaks Rust and wire | returns \"old\": removed",
                "breaks Rust only | param \"name\": made optional (the field becomes an Option)",
                "breaks wire only | param \"size\": maximum 100 -> 10",
                "compatible | param \"mode\": enum value \"c\" added",
            ]
        );
        // An answer that the schema now describes: a struct for Rust, the same bytes.
        let untyped = spec(json!({}), json!({"type": "object"}));
        let typed = spec(
            json!({}),
            json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        );
        assert_eq!(
            classes(&untyped, &typed),
            ["breaks Rust only | returns: now has typed properties (a struct where there was a map)"]
        );
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
            since: None,
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
