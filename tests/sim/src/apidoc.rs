//! `/pve-docs/api-viewer/apidoc.js`, rebuilt from the facts table: the API tree with each
//! method's parameter facts (no prose), assigned to `apiSchema` as PVE's viewer file does.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::facts::{operations, Op, Param};

fn param_schema(p: &Param) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from(p.ty.clone()));
    if p.optional {
        m.insert("optional".into(), Value::from(1));
    }
    if let Some(e) = &p.enum_values {
        m.insert("enum".into(), json!(e));
    }
    if let Some(v) = p.minimum {
        m.insert("minimum".into(), json!(v));
    }
    if let Some(v) = p.maximum {
        m.insert("maximum".into(), json!(v));
    }
    if let Some(v) = p.min_length {
        m.insert("minLength".into(), json!(v));
    }
    if let Some(v) = p.max_length {
        m.insert("maxLength".into(), json!(v));
    }
    if let Some(f) = &p.format {
        m.insert("format".into(), Value::from(f.clone()));
    }
    if let Some(keys) = &p.property_string {
        let f: Map<String, Value> = keys
            .iter()
            .map(|(k, v)| (k.clone(), param_schema(v)))
            .collect();
        m.insert("format".into(), Value::Object(f));
    }
    if let Some(i) = &p.items {
        m.insert("items".into(), param_schema(i));
    }
    Value::Object(m)
}

fn method(op: &Op) -> Value {
    let props: Map<String, Value> = op
        .params
        .iter()
        .map(|(k, p)| (k.clone(), param_schema(p)))
        .collect();
    let mut m = json!({
        "method": op.method,
        "name": op.handler,
        "allowtoken": 1,
        "parameters": {"type": "object", "additionalProperties": 0, "properties": props},
        "returns": {"type": op.returns.ty},
    });
    if let Some(p) = &op.proxyto {
        m["proxyto"] = Value::from(p.clone());
    }
    m
}

fn parent(path: &str) -> Option<&str> {
    let i = path.rfind('/')?;
    (i > 0).then(|| &path[..i])
}

/// The viewer file's text (built once).
pub fn apidoc_js() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(build)
}

fn build() -> String {
    let mut by_path: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for op in operations() {
        let mut p = op.path.as_str();
        by_path.entry(p).or_default().push(op);
        loop {
            if !order.contains(&p) {
                order.push(p);
            }
            match parent(p) {
                Some(q) => {
                    by_path.entry(q).or_default();
                    p = q;
                }
                None => break,
            }
        }
    }
    fn node(path: &str, by_path: &BTreeMap<&str, Vec<&Op>>, order: &[&str]) -> Value {
        let children: Vec<Value> = order
            .iter()
            .filter(|c| parent(c) == Some(path))
            .map(|c| node(c, by_path, order))
            .collect();
        let text = path.rsplit('/').next().unwrap_or(path);
        let mut n = json!({"path": path, "text": text, "leaf": u8::from(children.is_empty())});
        let info: Map<String, Value> = by_path
            .get(path)
            .into_iter()
            .flatten()
            .map(|op| (op.method.clone(), method(op)))
            .collect();
        if !info.is_empty() {
            n["info"] = Value::Object(info);
        }
        if !children.is_empty() {
            n["children"] = Value::Array(children);
        }
        n
    }
    let roots: Vec<Value> = order
        .iter()
        .filter(|p| parent(p).is_none())
        .map(|p| node(p, &by_path, &order))
        .collect();
    format!(
        "// API viewer data rebuilt by pve-sim from its schema facts\nconst apiSchema = {};\n\nExt.onReady(function() {{}});\n",
        Value::Array(roots)
    )
}
