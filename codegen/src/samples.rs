//! The answer samples behind the SDK's decode test (`generated/samples.rs`, compiled only for
//! the SDK's own tests): for every operation, an answer with every field the schema lists, and
//! the JSON path of each field with whether it is required. The test removes and nulls each
//! field in turn: an optional one must still decode, a required one must fail naming its path.
//!
//! Values are placeholders of the right type (`"s"`, `1`, a valid UPID, a property string of
//! its required keys); they come from the IR's types, never from the schema's text.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use serde_json::{Map, Value};

use crate::ir::{Api, Field, ModPath, PropString, Ty, TypeDef, TypeKind};

/// Deeper than any answer of PVE's schema: a guard against a type that contains itself.
const MAX_DEPTH: usize = 24;

struct Types<'a> {
    defs: BTreeMap<(&'a ModPath, &'a str), &'a TypeDef>,
}

/// One answer sample: the JSON and the fields in it, as (jq path, required).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The answer.
    pub json: Value,
    /// Every field of every struct in it, by jq path, with whether it is required.
    pub fields: Vec<(String, bool)>,
}

/// Whether a key is written `.name` in a path (else `["key"]`), as the SDK's decoder does.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

fn field_step(path: &str, wire: &str) -> String {
    if is_name(wire) {
        format!("{path}.{wire}")
    } else {
        format!("{path}[{}]", Value::String(wire.to_owned()))
    }
}

fn jq(path: &str) -> String {
    if path.is_empty() {
        ".".to_owned()
    } else if path.starts_with('.') {
        path.to_owned()
    } else {
        format!(".{path}")
    }
}

impl<'a> Types<'a> {
    fn new(api: &'a Api) -> Self {
        let mut defs = BTreeMap::new();
        for (path, m) in &api.modules {
            for t in &m.types {
                defs.insert((path, t.name.as_str()), t);
            }
        }
        Types { defs }
    }

    fn value(&self, ty: &Ty, path: &str, depth: usize, fields: &mut Vec<(String, bool)>) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        match ty {
            Ty::String | Ty::Secret => Value::from("s"),
            Ty::Integer => Value::from(1),
            Ty::Number => Value::from(1.5),
            Ty::Boolean => Value::from(1),
            Ty::Unit => Value::Null,
            Ty::Value => Value::from("v"),
            Ty::Upid => Value::from("UPID:pve1:0000ABCD:0001E240:6720F1A2:qmstart:100:root@pam:"),
            Ty::JsonObject => Value::Object(Map::new()),
            Ty::Vec(t) => Value::Array(vec![self.value(
                t,
                &format!("{path}[0]"),
                depth + 1,
                fields,
            )]),
            Ty::Option(t) => self.value(t, path, depth + 1, fields),
            Ty::Map(t) => {
                let mut m = Map::new();
                let v = self.value(t, &format!("{path}[\"key\"]"), depth + 1, fields);
                m.insert("key".to_owned(), v);
                Value::Object(m)
            }
            Ty::Indexed { item, .. } => self.value(item, path, depth + 1, fields),
            Ty::Named(r) => match self.defs.get(&(&r.module, r.name.as_str())) {
                None => Value::Null,
                Some(def) => match &def.kind {
                    TypeKind::Struct { fields: fs } => {
                        let mut m = Map::new();
                        self.fields_into(fs, path, depth + 1, &mut m, fields);
                        Value::Object(m)
                    }
                    TypeKind::Enum { variants } => Value::from(
                        variants
                            .first()
                            .map_or("x", |(_, wire)| wire.as_str())
                            .to_owned(),
                    ),
                    TypeKind::PropString(p) => Value::from(self.prop_text(p)),
                    // Reached only flattened, through `fields_into`.
                    TypeKind::Tagged { .. } => Value::Object(Map::new()),
                },
            },
        }
    }

    /// The fields of a struct (or of a union's first variant) into `m`, recording each one.
    fn fields_into(
        &self,
        fs: &[Field],
        path: &str,
        depth: usize,
        m: &mut Map<String, Value>,
        fields: &mut Vec<(String, bool)>,
    ) {
        for f in fs {
            match &f.ty {
                Ty::Indexed { item, spec: _ } => {
                    let base = crate::names::indexed_base(&f.wire).unwrap_or(&f.wire);
                    let key = format!("{base}0");
                    let p = field_step(path, &key);
                    fields.push((jq(&p), false));
                    let v = self.value(item, &p, depth, fields);
                    m.insert(key, v);
                }
                Ty::Named(r) if f.flatten => {
                    let Some(def) = self.defs.get(&(&r.module, r.name.as_str())) else {
                        continue;
                    };
                    let TypeKind::Tagged { tag, variants } = &def.kind else {
                        continue;
                    };
                    let Some((wire, _, vfields)) = variants.first() else {
                        continue;
                    };
                    fields.push((jq(&field_step(path, tag)), f.required));
                    m.insert(tag.clone(), Value::from(wire.clone()));
                    self.fields_into(vfields, path, depth, m, fields);
                }
                ty => {
                    let p = field_step(path, &f.wire);
                    fields.push((jq(&p), f.required));
                    let v = self.value(ty, &p, depth, fields);
                    m.insert(f.wire.clone(), v);
                }
            }
        }
    }

    /// A property string of the required keys (or of the first key when none is required).
    fn prop_text(&self, p: &PropString) -> String {
        let mut keys: Vec<_> = p.fields.iter().filter(|f| f.required).collect();
        if keys.is_empty() {
            keys.extend(p.fields.first());
        }
        keys.iter()
            .map(|f| {
                let v = match &f.ty {
                    Ty::Integer => "1".to_owned(),
                    Ty::Number => "1.5".to_owned(),
                    Ty::Boolean => "1".to_owned(),
                    Ty::Named(r) => match self.defs.get(&(&r.module, r.name.as_str())) {
                        Some(TypeDef {
                            kind: TypeKind::Enum { variants },
                            ..
                        }) => variants.first().map_or("x", |(_, w)| w.as_str()).to_owned(),
                        _ => "s".to_owned(),
                    },
                    _ => "s".to_owned(),
                };
                format!("{}={v}", f.key)
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The sample answer of every operation, by `METHOD /path`.
pub fn samples(api: &Api) -> BTreeMap<String, (ModPath, String, Sample)> {
    let types = Types::new(api);
    let mut out = BTreeMap::new();
    for (path, m) in &api.modules {
        for op in &m.ops {
            let mut fields = Vec::new();
            let json = types.value(&op.response, "", 0, &mut fields);
            out.insert(
                op.key(),
                (
                    path.clone(),
                    op.response_name.clone(),
                    Sample { json, fields },
                ),
            );
        }
    }
    out
}

/// `generated/samples.rs`: the samples as one JSON text (a line per operation: `[op, answer,
/// [[path, required], ...]]`), which costs rustfmt one token, and the table of decoders, one per
/// operation and behind its feature.
pub fn samples_tokens(api: &Api, features: &crate::features::Features) -> TokenStream {
    let all = samples(api);
    let count = all.len();
    let mut data = String::from("[\n");
    for (i, (key, (_, _, s))) in all.iter().enumerate() {
        let fields: Vec<Value> = s
            .fields
            .iter()
            .map(|(p, r)| Value::Array(vec![Value::from(p.clone()), Value::from(*r)]))
            .collect();
        let line = Value::Array(vec![
            Value::from(key.clone()),
            s.json.clone(),
            Value::Array(fields),
        ]);
        data.push_str(&line.to_string());
        data.push_str(if i + 1 < count { ",\n" } else { "\n" });
    }
    data.push(']');
    // A raw string with `##` delimiters: JSON text never holds `"##` unless a key or value
    // starts with `##`, which no name of the schema does.
    assert!(
        !data.contains("\"##"),
        "sample text would end the raw string"
    );
    let data: TokenStream = format!("r##\"{data}\"##")
        .parse()
        .expect("a raw string literal");
    let pushes = all.into_iter().map(|(key, (module, name, _))| {
        let segs = module.iter().map(|s| format_ident!("{}", s));
        let ty = format_ident!("{}", name);
        let path = key.split_once(' ').map_or("", |(_, p)| p);
        let cfg = match crate::features::op_feature(path) {
            Some(feat) => features.cfg(&std::iter::once(feat).collect()),
            None => quote!(),
        };
        quote! {
            #cfg
            out.push((#key, decode::<crate::generated::#(#segs::)*#ty> as Decode));
        }
    });
    quote! {
        //! An answer sample of every operation with the JSON path of each field (and whether it
        //! is required), for the SDK's decode test. Placeholder values of the right types.
        /// Decodes an answer as an operation's response type.
        pub(crate) type Decode = fn(serde_json::Value) -> Result<(), serde_json::Error>;
        fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<(), serde_json::Error> {
            crate::lenient::from_value::<T>(v).map(drop)
        }
        /// How many operations the schema has (each with a decoder when every feature is on).
        pub(crate) const COUNT: usize = #count;
        /// A line per operation: `[op, answer, [[jq path, required], ...]]`.
        pub(crate) const SAMPLES: &str = #data;
        /// The decoder of every operation whose feature is on, by `METHOD /path`.
        #[allow(clippy::vec_init_then_push, reason = "each push has its feature's cfg")]
        pub(crate) fn decoders() -> Vec<(&'static str, Decode)> {
            let mut out = Vec::new();
            #(#pushes)*
            out
        }
    }
}
