//! The facts table the simulator validates requests with: every operation's method, path,
//! handler and parameter facts (type, optional, enum, range, length, format name, pattern),
//! the shape of its answer, the first PVE version that has it (`since`), and whether API tokens
//! may call it (`allowtoken`, written only when they may not). Facts only: no description prose.

use serde_json::{json, Map, Value};

use crate::raw::{Format, Schema, Spec};

fn param_facts(s: &Schema) -> Value {
    let mut m = Map::new();
    let ty = s.ty.clone().unwrap_or_else(|| {
        if s.properties.is_some() {
            "object".into()
        } else if s.items.is_some() {
            "array".into()
        } else {
            "string".into()
        }
    });
    m.insert("type".into(), Value::from(ty));
    if s.optional {
        m.insert("optional".into(), Value::from(true));
    }
    if let Some(e) = &s.enum_values {
        m.insert("enum".into(), Value::from(e.clone()));
    }
    for (k, v) in [("minimum", s.minimum), ("maximum", s.maximum)] {
        if let Some(v) = v {
            m.insert(k.into(), Value::from(v));
        }
    }
    for (k, v) in [("minLength", s.min_length), ("maxLength", s.max_length)] {
        if let Some(v) = v {
            m.insert(k.into(), Value::from(v));
        }
    }
    match &s.format {
        Some(Format::Named(n)) => {
            m.insert("format".into(), Value::from(n.clone()));
        }
        Some(Format::Inline(keys)) => {
            // An alias key (`virtio=MAC` for `model=virtio,macaddr=MAC`) is only its target: the
            // simulator needs to know the key exists, as PVE's parse_property_string does.
            let ks: Map<String, Value> = keys
                .iter()
                .map(|(name, k)| {
                    let facts = match &k.alias {
                        Some(target) => json!({ "type": "string", "alias": target }),
                        None => {
                            let mut f = param_facts(k);
                            if k.default_key {
                                f["defaultKey"] = Value::from(true);
                            }
                            f
                        }
                    };
                    (name.clone(), facts)
                })
                .collect();
            m.insert("propertyString".into(), Value::Object(ks));
        }
        None => {}
    }
    if let Some(p) = &s.pattern {
        m.insert("pattern".into(), Value::from(p.clone()));
    }
    if let Some(i) = &s.items {
        m.insert("items".into(), param_facts(i));
    }
    Value::Object(m)
}

/// The shape of an answer: type, and for objects the properties (with `optional`), for arrays
/// the items, enough to build a valid empty answer.
fn returns_facts(s: &Schema) -> Value {
    let ty = s.ty.clone().unwrap_or_else(|| {
        if s.properties.is_some() {
            "object".into()
        } else if s.items.is_some() {
            "array".into()
        } else {
            "any".into()
        }
    });
    let mut m = Map::new();
    m.insert("type".into(), Value::from(ty));
    if s.optional {
        m.insert("optional".into(), Value::from(true));
    }
    if let Some(e) = s.enum_values.as_ref().and_then(|e| e.first()) {
        m.insert("example".into(), Value::from(e.clone()));
    }
    if let Some(props) = &s.properties {
        let p: Map<String, Value> = props
            .iter()
            .filter(|(k, _)| !k.ends_with("[n]"))
            .map(|(k, v)| (k.clone(), returns_facts(v)))
            .collect();
        if !p.is_empty() {
            m.insert("properties".into(), Value::Object(p));
        }
    }
    if let Some(i) = &s.items {
        m.insert("items".into(), returns_facts(i));
    }
    Value::Object(m)
}

/// The facts of every operation, as the simulator's table; `since` comes from the lowered API
/// (`METHOD /path` -> the first version that has it).
pub fn facts(spec: &Spec, since: &std::collections::BTreeMap<String, (u16, u16)>) -> Value {
    let ops: Vec<Value> = spec
        .operations()
        .into_iter()
        .map(|(node, m)| {
            let params: Map<String, Value> = m
                .parameters
                .properties
                .iter()
                .flatten()
                .map(|(k, s)| (k.clone(), param_facts(s)))
                .collect();
            let mut op = json!({
                "method": m.verb,
                "path": node.path,
                "handler": m.name,
                "params": params,
                "returns": returns_facts(&m.returns),
                "proxyto": m.proxyto,
            });
            if let Some((a, b)) = since.get(&format!("{} {}", m.verb, node.path)) {
                op["since"] = Value::from(format!("{a}.{b}"));
            }
            if !m.allowtoken {
                op["allowtoken"] = Value::from(false);
            }
            op
        })
        .collect();
    json!({
        "generated": format!(
            "by pve-codegen from {} (sha256 {}). Do not edit.",
            spec.file_name, spec.sha256
        ),
        "operations": ops,
    })
}

/// The table as text: one operation per line, so diffs stay readable.
pub fn facts_text(spec: &Spec, api: &crate::ir::Api) -> String {
    let since = api
        .modules
        .values()
        .flat_map(|m| &m.ops)
        .map(|op| (format!("{} {}", op.verb, op.path), op.since))
        .collect();
    let v = facts(spec, &since);
    let mut out = String::new();
    out.push_str("{\"generated\":");
    out.push_str(&v["generated"].to_string());
    out.push_str(",\"operations\":[\n");
    let ops = v["operations"].as_array().cloned().unwrap_or_default();
    for (i, op) in ops.iter().enumerate() {
        out.push_str(&op.to_string());
        if i + 1 < ops.len() {
            out.push(',');
        }
        out.push('\n');
    }
    out.push_str("]}\n");
    out
}
