//! The facts table the simulator validates requests with and rebuilds the API viewer's
//! `apidoc.js` from: the schema's tree, one node per line, written from the raw mirror
//! ([`crate::raw`]) in PVE's own key names, with every key the mirror reads except the prose
//! (`description`, `verbose_description`, `title`, the viewer's `typetext` and
//! `format_description` labels, the `links` hints, and the permissions' `description`).
//!
//! Because it is written from the mirror and the mirror rejects unknown keys, reading the
//! rebuilt tree with [`crate::raw::parse`] gives the mirror back without its prose; the
//! generator reads nothing else, so a schema imported from the simulator generates the same
//! SDK. Two keys are ours, and `apidoc.js` drops them: `depth` (the node's depth in the tree,
//! 0 for `/cluster`) and `since` (per method, the first PVE release that has it).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::raw::{AdditionalProperties, Dialect, Format, Method, Node, Permissions, Schema, Spec};

/// A number as PVE writes it: integral values without a fraction.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

fn flag(m: &mut Map<String, Value>, key: &str, on: bool) {
    if on {
        m.insert(key.into(), Value::from(1));
    }
}

fn text(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        m.insert(key.into(), Value::from(v.clone()));
    }
}

fn schemas(props: &BTreeMap<String, Schema>, d: Dialect) -> Value {
    Value::Object(
        props
            .iter()
            .map(|(k, s)| (k.clone(), schema_in(s, d)))
            .collect(),
    )
}

/// A schema's facts in PVE's key names.
pub fn schema(s: &Schema) -> Value {
    schema_in(s, Dialect::Pve)
}

/// A schema's facts in the key names of `d`'s schema: PBS writes inline formats as whole
/// schemas.
pub fn schema_in(s: &Schema, d: Dialect) -> Value {
    let mut m = Map::new();
    text(&mut m, "type", &s.ty);
    flag(&mut m, "optional", s.optional);
    match (&s.format, d) {
        (Some(Format::Named(n)), _) => {
            m.insert("format".into(), Value::from(n.clone()));
        }
        (Some(Format::Inline(keys)), Dialect::Pve) => {
            m.insert("format".into(), schemas(keys, d));
        }
        (Some(Format::Inline(keys)), Dialect::Pbs) => {
            m.insert(
                "format".into(),
                serde_json::json!({"type": "object", "properties": schemas(keys, d)}),
            );
        }
        // PVE's form has no list format: the SDK's parameter table (PVE's form) checks such a
        // string as a string.
        (Some(Format::List(_)), Dialect::Pve) => {}
        (Some(Format::List(items)), Dialect::Pbs) => {
            m.insert(
                "format".into(),
                serde_json::json!({"type": "array", "items": schema_in(items, d)}),
            );
        }
        (None, _) => {}
    }
    if let Some(d) = &s.default {
        m.insert("default".into(), d.clone());
    }
    if let Some(e) = &s.enum_values {
        m.insert("enum".into(), Value::from(e.clone()));
    }
    for (k, v) in [
        ("minimum", s.minimum),
        ("maximum", s.maximum),
        ("min", s.min),
        ("max", s.max),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), number(v));
        }
    }
    for (k, v) in [("minLength", s.min_length), ("maxLength", s.max_length)] {
        if let Some(v) = v {
            m.insert(k.into(), Value::from(v));
        }
    }
    text(&mut m, "pattern", &s.pattern);
    if let Some(p) = &s.properties {
        m.insert("properties".into(), schemas(p, d));
    }
    match &s.additional_properties {
        Some(AdditionalProperties::Allowed(a)) => {
            m.insert("additionalProperties".into(), Value::from(u8::from(*a)));
        }
        Some(AdditionalProperties::Schema(a)) => {
            m.insert("additionalProperties".into(), schema_in(a, d));
        }
        None => {}
    }
    if let Some(i) = &s.items {
        m.insert("items".into(), schema_in(i, d));
    }
    text(&mut m, "alias", &s.alias);
    text(&mut m, "keyAlias", &s.key_alias);
    flag(&mut m, "default_key", s.default_key);
    text(&mut m, "requires", &s.requires);
    text(&mut m, "type-property", &s.type_property);
    if let Some(t) = &s.instance_types {
        m.insert("instance-types".into(), Value::from(t.clone()));
    }
    if let Some(alts) = &s.one_of {
        m.insert(
            "oneOf".into(),
            Value::Array(alts.iter().map(|a| schema_in(a, d)).collect()),
        );
    }
    text(&mut m, "renderer", &s.renderer);
    Value::Object(m)
}

fn permissions(p: &Permissions) -> Value {
    let mut m = Map::new();
    if let Some(c) = &p.check {
        m.insert("check".into(), c.clone());
    }
    text(&mut m, "user", &p.user);
    Value::Object(m)
}

/// A method's facts in PVE's key names (`allowtoken` always written, as PVE does).
pub fn method(v: &Method) -> Value {
    method_in(v, Dialect::Pve)
}

/// A method's facts in the key names of `d`'s schema (PBS: `DOWNLOAD`/`UPLOAD` kept).
pub fn method_in(v: &Method, d: Dialect) -> Value {
    let mut m = Map::new();
    let verb = v.transfer.clone().unwrap_or_else(|| v.verb.clone());
    m.insert("method".into(), Value::from(verb));
    m.insert("name".into(), Value::from(v.name.clone()));
    m.insert("allowtoken".into(), Value::from(u8::from(v.allowtoken)));
    flag(&mut m, "protected", v.protected);
    text(&mut m, "proxyto", &v.proxyto);
    flag(&mut m, "expose_credentials", v.expose_credentials);
    flag(&mut m, "download_allowed", v.download_allowed);
    if let Some(p) = &v.permissions {
        m.insert("permissions".into(), permissions(p));
    }
    m.insert("parameters".into(), schema_in(&v.parameters, d));
    m.insert("returns".into(), schema_in(&v.returns, d));
    Value::Object(m)
}

/// One line of the table: a node without its children, with its depth and each method's
/// `since` (from the lowered API: `METHOD /path` -> the first version that has it).
fn node_line(n: &Node, depth: usize, since: &BTreeMap<String, (u16, u16)>, d: Dialect) -> Value {
    let mut m = Map::new();
    m.insert("path".into(), Value::from(n.path.clone()));
    m.insert("text".into(), Value::from(n.text.clone()));
    m.insert("leaf".into(), Value::from(u8::from(n.leaf)));
    m.insert("depth".into(), Value::from(depth));
    if !n.info.is_empty() {
        let info: Map<String, Value> = n
            .info
            .iter()
            .map(|(verb, v)| (verb.clone(), method_in(v, d)))
            .collect();
        m.insert("info".into(), Value::Object(info));
        let s: Map<String, Value> = n
            .info
            .keys()
            .filter_map(|verb| {
                since
                    .get(&format!("{verb} {}", n.path))
                    .map(|(a, b)| (verb.clone(), Value::from(format!("{a}.{b}"))))
            })
            .collect();
        if !s.is_empty() {
            m.insert("since".into(), Value::Object(s));
        }
    }
    Value::Object(m)
}

/// The table's lines: every node of the tree in order (a node, then its children).
pub fn lines(spec: &Spec, since: &BTreeMap<String, (u16, u16)>) -> Vec<Value> {
    fn walk(
        n: &Node,
        depth: usize,
        since: &BTreeMap<String, (u16, u16)>,
        d: Dialect,
        out: &mut Vec<Value>,
    ) {
        out.push(node_line(n, depth, since, d));
        for c in &n.children {
            walk(c, depth + 1, since, d, out);
        }
    }
    let mut out = Vec::new();
    for r in &spec.roots {
        walk(r, 0, since, spec.dialect, &mut out);
    }
    out
}

/// The table as text: one tree node per line, so diffs stay readable.
pub fn facts_text(spec: &Spec, api: &crate::ir::Api) -> String {
    let since = api
        .modules
        .values()
        .flat_map(|m| &m.ops)
        .map(|op| (format!("{} {}", op.verb, op.path), op.since))
        .collect();
    let generated = Value::from(format!(
        "by pve-codegen from {} (sha256 {}). Do not edit.",
        spec.file_name, spec.sha256
    ));
    let nodes = lines(spec, &since);
    let mut out = String::new();
    out.push_str("{\"generated\":");
    out.push_str(&generated.to_string());
    out.push_str(",\"nodes\":[\n");
    for (i, n) in nodes.iter().enumerate() {
        out.push_str(&n.to_string());
        if i + 1 < nodes.len() {
            out.push(',');
        }
        out.push('\n');
    }
    out.push_str("]}\n");
    out
}

/// The schema array rebuilt from the table's lines, as `apidoc.js` holds it: the nodes nested
/// by `depth`, without our keys. `diff` reads a committed table this way (the schema the SDK
/// was generated from, without its prose); the simulator has its own copy of this walk because
/// it does not depend on the generator. `None` when the lines do not nest.
pub fn rebuild(lines: &[Value]) -> Option<Value> {
    fn take(lines: &[Value], i: &mut usize, depth: u64) -> Vec<Value> {
        let mut out = Vec::new();
        while *i < lines.len() && lines[*i]["depth"].as_u64() == Some(depth) {
            let mut n = lines[*i].clone();
            *i += 1;
            if let Some(obj) = n.as_object_mut() {
                obj.remove("depth");
                obj.remove("since");
                let children = take(lines, i, depth + 1);
                if !children.is_empty() {
                    obj.insert("children".into(), Value::Array(children));
                }
            }
            out.push(n);
        }
        out
    }
    let mut i = 0;
    let roots = take(lines, &mut i, 0);
    (i == lines.len()).then_some(Value::Array(roots))
}

/// Reads a schema file or a facts table (`tests/sim/src/facts.json`, what `generate` writes
/// beside the SDK: the schema it was generated from, without prose), for `diff`.
///
/// # Errors
///
/// As [`crate::raw::load`]; a facts table whose lines do not nest.
pub fn load_schema_or_table(path: &std::path::Path) -> Result<Spec, crate::diag::Diagnostics> {
    let table = std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .filter(|v| v.get("nodes").is_some_and(Value::is_array));
    let Some(table) = table else {
        return crate::raw::load(path);
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let lines = table["nodes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match rebuild(lines) {
        Some(tree) => crate::raw::parse(&name, tree.to_string().as_bytes()),
        None => {
            let mut d = crate::diag::Diagnostics::new("load");
            d.push(
                name.clone(),
                "a facts table whose lines do not nest by depth",
            );
            d.finish(Spec {
                file_name: name,
                sha256: String::new(),
                dialect: Dialect::Pve,
                roots: Vec::new(),
                protocol_roots: Vec::new(),
                streamed: Vec::new(),
            })
        }
    }
}

/// The SDK's parameter table (`generated::params`): per operation, one line
/// `{"op":"METHOD /path","params":SCHEMA}` with the parameters' facts as the table above writes
/// them, in a raw string constant (the SDK reads it on first use, so it costs no compile time).
pub fn params_rust(spec: &Spec, header: &str) -> String {
    fn walk(n: &Node, out: &mut Vec<String>) {
        for (verb, m) in &n.info {
            let line = serde_json::json!({
                "op": format!("{verb} {}", n.path),
                "params": schema(&m.parameters),
            });
            out.push(line.to_string());
        }
        for c in &n.children {
            walk(c, out);
        }
    }
    let mut lines = Vec::new();
    for r in &spec.roots {
        walk(r, &mut lines);
    }
    let body = lines.join("\n");
    let mut hashes = "#".to_owned();
    while body.contains(&format!("\"{hashes}")) {
        hashes.push('#');
    }
    format!(
        "{header}//! The parameters of every operation, as PVE's schema states them (types, ranges, lengths,\n\
         //! enums, formats, property-string keys; no prose): one line per operation. Read by\n\
         //! `crate::params::check` on first use.\n\n\
         /// One JSON line per operation: `{{\"op\":\"METHOD /path\",\"params\":SCHEMA}}`.\n\
         pub const TABLE: &str = r{hashes}\"\n{body}\n\"{hashes};\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(s: &mut Schema) {
        s.description = None;
        s.verbose_description = None;
        s.title = None;
        s.typetext = None;
        s.format_description = None;
        s.links = None;
        for p in s.properties.iter_mut().flat_map(|p| p.values_mut()) {
            strip(p);
        }
        if let Some(Format::Inline(keys)) = &mut s.format {
            keys.values_mut().for_each(strip);
        }
        if let Some(AdditionalProperties::Schema(a)) = &mut s.additional_properties {
            strip(a);
        }
        if let Some(i) = &mut s.items {
            strip(i);
        }
        s.one_of.iter_mut().flatten().for_each(strip);
    }

    #[test]
    fn the_rebuilt_tree_reads_back_as_the_mirror_without_its_prose() {
        let text = r#"[{"path":"/a","text":"a","leaf":0,"children":[
            {"path":"/a/{id}","text":"{id}","leaf":1,"info":{"PUT":{
              "method":"PUT","name":"update","description":"Prose.","protected":1,
              "proxyto":"node","allowtoken":0,
              "permissions":{"check":["perm","/a",["Sys.Modify"]],"description":"More prose."},
              "parameters":{"type":"object","additionalProperties":0,"properties":{
                "id":{"type":"string","description":"An id.","typetext":"<string>","pattern":"[a-z]+","maxLength":9},
                "description":{"type":"string","optional":1,"title":"A property named description"},
                "net[n]":{"type":"string","optional":1,"format":{
                  "model":{"type":"string","enum":["e1000","virtio"],"default_key":1},
                  "virtio":{"alias":"model","keyAlias":"model"},
                  "rate":{"type":"number","minimum":0,"maximum":1.5,"default":1}}},
                "list":{"type":"array","optional":1,"items":{"type":"integer","minimum":-1}}}},
              "returns":{"type":"object","properties":{"x":{"type":"boolean","optional":1}}}}}}]},
          {"path":"/b","text":"b","leaf":1,"info":{"GET":{"method":"GET","name":"b",
              "allowtoken":1,"parameters":{"type":"object"},"returns":{}}}}]"#;
        let spec = crate::raw::parse("pve-9.2.json", text.as_bytes()).expect("parses");
        let since = BTreeMap::from([("PUT /a/{id}".to_owned(), (9, 1))]);
        let lines = lines(&spec, &since);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["since"], serde_json::json!({"PUT": "9.1"}));
        assert_eq!(lines[1]["depth"], 1);
        let table = Value::Array(lines.clone()).to_string();
        for prose in [
            "Prose.",
            "More prose.",
            "An id.",
            "<string>",
            "A property named",
        ] {
            assert!(!table.contains(prose), "{prose} leaked into the table");
        }
        let rebuilt = rebuild(&lines).expect("every line nests").to_string();
        let back = crate::raw::parse("pve-9.2.json", rebuilt.as_bytes()).expect("reparses");
        let (mut want, got) = (spec.roots.clone(), back.roots);
        fn strip_node(n: &mut Node) {
            for m in n.info.values_mut() {
                m.description = None;
                if let Some(p) = &mut m.permissions {
                    p.description = None;
                }
                strip(&mut m.parameters);
                strip(&mut m.returns);
            }
            n.children.iter_mut().for_each(strip_node);
        }
        want.iter_mut().for_each(strip_node);
        assert_eq!(got, want);
        let prop = &got[0].children[0].info["PUT"]
            .parameters
            .properties
            .as_ref()
            .expect("props");
        assert!(
            prop.contains_key("description"),
            "a property named description stays"
        );
    }
}
