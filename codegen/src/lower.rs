//! Stage `lower`: raw schema + patches -> named IR.
//!
//! Decides every Rust name (modules from the path, types from handler names, fields from wire
//! names), turns inline formats into shared property-string types, indexed parameters into
//! bounded maps and `type-property` objects into tagged unions, and records every place where
//! the schema gives no type.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::diag::Diagnostics;
use crate::ir::{
    Api, Fallback, Field, IndexSpecDef, ModPath, Module, Op, PathSpec, PropField, PropString, Ty,
    TypeDef, TypeKind, TypeRef,
};
use crate::names::{indexed_base, pascal, snake, type_name, variant_name};
use crate::patch::Patches;
use crate::raw::{AdditionalProperties, Format, Method, Node, Schema, Spec};

/// What lowering needs besides the schema and the patches.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The schema's PVE version.
    pub version: (u16, u16),
    /// First version per operation (`METHOD /path`), from older schemas.
    pub since: BTreeMap<String, (u16, u16)>,
    /// Keep upstream description prose (local builds only).
    pub upstream_docs: bool,
}

/// The module path of an API path: `/nodes/{node}/network` -> `nodes::node::network`.
pub fn module_of(path: &str) -> ModPath {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| snake(s.trim_start_matches('{').trim_end_matches('}')))
        .collect()
}

/// The `{param}` names of a path template, in order.
pub fn path_params(path: &str) -> Vec<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(str::to_owned)
        .collect()
}

/// Deterministic text of a schema's facts (no prose), used to tell formats apart.
fn facts_key(s: &Schema, with_optional: bool) -> String {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    if let Some(t) = &s.ty {
        put("type", Value::from(t.clone()));
    }
    if with_optional && s.optional {
        put("optional", Value::from(true));
    }
    match &s.format {
        Some(Format::Named(n)) => put("format", Value::from(n.clone())),
        Some(Format::Inline(keys)) => put(
            "format",
            Value::from(
                keys.iter()
                    .map(|(k, v)| format!("{k}:{}", facts_key(v, true)))
                    .collect::<Vec<_>>()
                    .join(";"),
            ),
        ),
        Some(Format::List(items)) => put(
            "format",
            Value::from(format!("list:{}", facts_key(items, true))),
        ),
        None => {}
    }
    if let Some(d) = &s.default {
        put("default", d.clone());
    }
    if let Some(e) = &s.enum_values {
        put("enum", Value::from(e.clone()));
    }
    for (k, v) in [
        ("minimum", s.minimum),
        ("maximum", s.maximum),
        ("min", s.min),
        ("max", s.max),
    ] {
        if let Some(v) = v {
            put(k, Value::from(v));
        }
    }
    for (k, v) in [("minLength", s.min_length), ("maxLength", s.max_length)] {
        if let Some(v) = v {
            put(k, Value::from(v));
        }
    }
    for (k, v) in [
        ("pattern", &s.pattern),
        ("alias", &s.alias),
        ("keyAlias", &s.key_alias),
        ("requires", &s.requires),
    ] {
        if let Some(v) = v {
            put(k, Value::from(v.clone()));
        }
    }
    if s.default_key {
        put("default_key", Value::from(true));
    }
    if let Some(i) = &s.items {
        put("items", Value::from(facts_key(i, true)));
    }
    Value::Object(m).to_string()
}

/// Doc facts of a schema: format, range, length, pattern, default, requires.
pub fn schema_facts(s: &Schema) -> Vec<String> {
    let mut f = Vec::new();
    if let Some(Format::Named(n)) = &s.format {
        f.push(format!("format `{n}`"));
    }
    match (s.minimum, s.maximum) {
        (Some(a), Some(b)) => f.push(format!("range {} - {}", num(a), num(b))),
        (Some(a), None) => f.push(format!("minimum {}", num(a))),
        (None, Some(b)) => f.push(format!("maximum {}", num(b))),
        (None, None) => {}
    }
    match (s.min_length, s.max_length) {
        (Some(a), Some(b)) => f.push(format!("length {a} - {b}")),
        (Some(a), None) => f.push(format!("minimum length {a}")),
        (None, Some(b)) => f.push(format!("maximum length {b}")),
        (None, None) => {}
    }
    if let Some(p) = &s.pattern {
        f.push(format!("pattern `{}`", p.replace('`', "'")));
    }
    if let Some(d) = &s.default {
        let text = match d {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        f.push(format!("default `{}`", text.replace('`', "'")));
    }
    if let Some(r) = &s.requires {
        f.push(format!("requires `{r}`"));
    }
    f
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// One property-string type: the formats merged into it and where it is used.
#[derive(Debug, Clone)]
struct PropGroup {
    base: String,
    keys: BTreeMap<String, Schema>,
    /// keys missing from at least one merged format
    partial: BTreeSet<String>,
    variants: BTreeSet<String>,
    modules: Vec<ModPath>,
    used_by: BTreeSet<String>,
    formats: usize,
}

impl PropGroup {
    fn compatible(&self, keys: &BTreeMap<String, Schema>) -> bool {
        keys.iter().all(|(k, s)| match self.keys.get(k) {
            Some(have) => facts_key(have, false) == facts_key(s, false),
            None => true,
        })
    }

    fn merge(&mut self, keys: &BTreeMap<String, Schema>) {
        let missing_here: Vec<String> = self
            .keys
            .keys()
            .filter(|k| !keys.contains_key(*k))
            .cloned()
            .collect();
        self.partial.extend(missing_here);
        if self.formats > 0 {
            for k in keys.keys() {
                if !self.keys.contains_key(k) {
                    self.partial.insert(k.clone());
                }
            }
        }
        for (k, s) in keys {
            let entry = self.keys.entry(k.clone()).or_insert_with(|| s.clone());
            entry.optional |= s.optional;
        }
        self.formats += 1;
    }
}

struct Occurrence {
    base: String,
    canon: String,
    keys: BTreeMap<String, Schema>,
    module: ModPath,
    location: String,
}

/// Where each (field name, enum values) pair is used: modules and operations.
type EnumUses = BTreeMap<(String, String), (Vec<ModPath>, BTreeSet<String>)>;

fn enum_key(name: &str, values: &[String]) -> (String, String) {
    (
        indexed_base(name).unwrap_or(name).to_owned(),
        values.join("\u{1f}"),
    )
}

fn collect_enums(s: &Schema, name: &str, module: &ModPath, op: &str, out: &mut EnumUses) {
    if let (Some(values), false) = (&s.enum_values, name.is_empty()) {
        let e = out.entry(enum_key(name, values)).or_default();
        e.0.push(module.clone());
        e.1.insert(op.to_owned());
    }
    if let Some(props) = &s.properties {
        for (k, v) in props {
            collect_enums(v, k, module, op, out);
        }
    }
    if let Some(i) = &s.items {
        collect_enums(i, name, module, op, out);
    }
    if let Some(alts) = &s.one_of {
        for a in alts {
            collect_enums(a, &alternative_name(a, name), module, op, out);
        }
    }
    if let Some(AdditionalProperties::Schema(a)) = &s.additional_properties {
        collect_enums(a, name, module, op, out);
    }
}

fn canon_of(keys: &BTreeMap<String, Schema>) -> String {
    keys.iter()
        .map(|(k, v)| format!("{k}={}", facts_key(v, true)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn collect_inline(s: &Schema, name: &str, module: &ModPath, loc: &str, out: &mut Vec<Occurrence>) {
    if let Some(Format::Inline(keys)) = &s.format {
        let base = indexed_base(name).unwrap_or(name).to_owned();
        out.push(Occurrence {
            base,
            canon: canon_of(keys),
            keys: keys.clone(),
            module: module.clone(),
            location: loc.to_owned(),
        });
    }
    if let Some(props) = &s.properties {
        for (k, v) in props {
            collect_inline(v, k, module, &format!("{loc} \"{k}\""), out);
        }
    }
    if let Some(i) = &s.items {
        collect_inline(i, name, module, loc, out);
    }
    if let Some(alts) = &s.one_of {
        for a in alts {
            collect_inline(a, &alternative_name(a, name), module, loc, out);
        }
    }
    if let Some(AdditionalProperties::Schema(a)) = &s.additional_properties {
        collect_inline(a, name, module, loc, out);
    }
}

/// The name a `oneOf` alternative's types are known by: `ospf-redistribute` for the `ospf`
/// alternative of `redistribute`, so that alternatives never share a type name.
fn alternative_name(alt: &Schema, name: &str) -> String {
    match &alt.instance_types {
        Some(types) if !types.is_empty() => format!("{}-{name}", types.join("-")),
        _ => name.to_owned(),
    }
}

fn common_prefix(paths: &[ModPath]) -> ModPath {
    let Some(first) = paths.first() else {
        return Vec::new();
    };
    let mut len = first.len();
    for p in &paths[1..] {
        len = len.min(p.len());
        for i in 0..len {
            if p[i] != first[i] {
                len = i;
                break;
            }
        }
    }
    first[..len].to_vec()
}

struct Lowerer<'a> {
    dialect: crate::raw::Dialect,
    patches: &'a Patches,
    opts: &'a Options,
    diags: Diagnostics,
    modules: BTreeMap<ModPath, Module>,
    fallbacks: Vec<Fallback>,
    /// (base, canon) -> property-string type
    prop_types: BTreeMap<(String, String), TypeRef>,
    /// (field name, values) -> enum shared by several operations
    shared_enums: BTreeMap<(String, String), TypeRef>,
    index_specs: BTreeMap<String, IndexSpecDef>,
    /// where each type name was defined, for collision messages: (module, name) -> location
    defined: BTreeMap<(ModPath, String), String>,
    /// secret patches that typed a field: (operation or "" for the unscoped ones, field)
    secret_hits: BTreeSet<(String, String)>,
    /// While lowering an operation's answer: the operation and where in the answer.
    answer: Option<AnswerPath>,
    /// response-fields patches that matched a field: (operation, field path)
    answer_hits: BTreeSet<(String, String)>,
    answer_stats: crate::ir::AnswerFieldStats,
}

/// Where the lowering is in an operation's answer: `["[]", "members", "[]", "ip"]`.
struct AnswerPath {
    op: String,
    stack: Vec<String>,
}

impl AnswerPath {
    /// `members[].ip`: the field path of `response-fields` patches.
    fn render(&self) -> String {
        let mut out = String::new();
        for part in &self.stack {
            if part == "[]" || part == "{}" {
                out.push_str(part);
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(part);
            }
        }
        out
    }
}

/// Lowers a loaded, patched schema.
///
/// # Errors
///
/// Every problem: name collisions, indexed parameters without a bound, conflicting unions.
pub fn lower(spec: &Spec, patches: &Patches, opts: &Options) -> Result<Api, Diagnostics> {
    let mut l = Lowerer {
        dialect: spec.dialect,
        patches,
        opts,
        diags: Diagnostics::new("lower"),
        modules: BTreeMap::new(),
        fallbacks: Vec::new(),
        prop_types: BTreeMap::new(),
        shared_enums: BTreeMap::new(),
        index_specs: BTreeMap::new(),
        defined: BTreeMap::new(),
        secret_hits: BTreeSet::new(),
        answer: None,
        answer_hits: BTreeSet::new(),
        answer_stats: crate::ir::AnswerFieldStats::default(),
    };
    l.modules.insert(Vec::new(), Module::default());
    l.module_tree(spec);
    l.property_strings(spec);
    l.shared_enums(spec);
    for (node, method) in spec.operations() {
        l.op(node, method);
    }
    // A secret entry that types nothing in this schema: stale for this version, or a name that
    // changed (a test asserts there is none for the newest schema; older ones may lack fields).
    let mut unused_secrets = Vec::new();
    for (op, field) in &patches.secret_scoped {
        if !l.secret_hits.contains(&(op.clone(), field.clone())) {
            unused_secrets.push(format!("{field} of {op}"));
        }
    }
    for field in &patches.secret_fields {
        if !l.secret_hits.contains(&(String::new(), field.clone())) {
            unused_secrets.push(field.clone());
        }
    }
    for (op, fields) in &patches.response_fields {
        for (path, f) in fields {
            if !l.answer_hits.contains(&(op.clone(), path.clone())) {
                l.diags.push(
                    &f.file,
                    format!("field \"{path}\" is not in the answer of \"{op}\" (plain fields only: not indexed keys or union tags' variants)"),
                );
            }
        }
    }
    let mut fallbacks = l.fallbacks;
    fallbacks.sort();
    let api = Api {
        spec_file: spec.file_name.clone(),
        sha256: spec.sha256.clone(),
        version: format!("{}.{}", opts.version.0, opts.version.1),
        dialect: spec.dialect,
        not_generated: not_generated(spec),
        modules: l.modules,
        index_specs: l.index_specs,
        fallbacks,
        patch_files: patches.files.clone(),
        errors: patches.errors.values().cloned().collect(),
        formats: patches.formats.values().cloned().collect(),
        predicates: patches.predicates.values().cloned().collect(),
        unused_secrets,
        answer_fields: l.answer_stats,
    };
    l.diags.finish(api)
}

impl<'a> Lowerer<'a> {
    fn module_tree(&mut self, spec: &Spec) {
        let mut urls: BTreeMap<ModPath, String> = BTreeMap::new();
        for node in spec.nodes() {
            let m = module_of(&node.path);
            if m.is_empty() && node.path == "/" && spec.dialect == crate::raw::Dialect::Pbs {
                // PBS's root `/`: its operation lives in the root module.
                continue;
            }
            if m.is_empty() {
                self.diags.push(
                    format!("path {}", node.path),
                    "a path needs at least one segment",
                );
                continue;
            }
            if let Some(other) = urls.get(&m) {
                if other != &node.path {
                    self.diags.push(
                        format!("path {}", node.path),
                        format!(
                            "module name collision: paths {other} and {} both map to module {}",
                            node.path,
                            m.join("::")
                        ),
                    );
                }
                continue;
            }
            let segments: Vec<&str> = node.path.split('/').filter(|s| !s.is_empty()).collect();
            let mut bad = false;
            for (seg, name) in segments.iter().zip(&m) {
                if let Some(why) = crate::names::ident_problem(name) {
                    self.diags.push(
                        format!("path {}", node.path),
                        format!("segment \"{seg}\" becomes module `{name}`, {why}"),
                    );
                    bad = true;
                }
            }
            if bad {
                continue;
            }
            urls.insert(m.clone(), node.path.clone());
            for i in 0..m.len() {
                let parent = m[..i].to_vec();
                self.modules
                    .entry(parent)
                    .or_default()
                    .children
                    .insert(m[i].clone());
            }
            self.modules.entry(m).or_default().url = Some(node.path.clone());
        }
    }

    fn define(&mut self, module: &ModPath, def: TypeDef) -> TypeRef {
        let key = (module.clone(), def.name.clone());
        if let Some(other) = self.defined.get(&key) {
            self.diags.push(
                def.location.clone(),
                format!(
                    "type name collision: {} in module {} is also defined by {other}",
                    def.name,
                    display_mod(module)
                ),
            );
        } else {
            self.defined.insert(key, def.location.clone());
        }
        let r = TypeRef {
            module: module.clone(),
            name: def.name.clone(),
        };
        self.modules
            .entry(module.clone())
            .or_default()
            .types
            .push(def);
        r
    }

    fn fallback(&mut self, location: &str, reason: &str) {
        self.fallbacks.push(Fallback {
            location: location.to_owned(),
            reason: reason.to_owned(),
        });
    }

    fn property_strings(&mut self, spec: &Spec) {
        let mut occ = Vec::new();
        for (node, method) in spec.operations() {
            let m = module_of(&node.path);
            let loc = format!("{} {}", method.verb, node.path);
            collect_inline(
                &method.parameters,
                "",
                &m,
                &format!("{loc} param"),
                &mut occ,
            );
            collect_inline(&method.returns, "", &m, &format!("{loc} returns"), &mut occ);
        }
        // Greedy merge per base name, in a fixed order.
        occ.sort_by(|a, b| (&a.base, &a.canon, &a.module).cmp(&(&b.base, &b.canon, &b.module)));
        let mut groups: BTreeMap<String, Vec<PropGroup>> = BTreeMap::new();
        for o in &occ {
            let list = groups.entry(o.base.clone()).or_default();
            let idx = match list.iter().position(|g| g.variants.contains(&o.canon)) {
                Some(i) => i,
                None => match list.iter().position(|g| g.compatible(&o.keys)) {
                    Some(i) => {
                        list[i].merge(&o.keys);
                        list[i].variants.insert(o.canon.clone());
                        i
                    }
                    None => {
                        let mut g = PropGroup {
                            base: o.base.clone(),
                            keys: BTreeMap::new(),
                            partial: BTreeSet::new(),
                            variants: BTreeSet::new(),
                            modules: Vec::new(),
                            used_by: BTreeSet::new(),
                            formats: 0,
                        };
                        g.merge(&o.keys);
                        g.variants.insert(o.canon.clone());
                        list.push(g);
                        list.len() - 1
                    }
                },
            };
            list[idx].modules.push(o.module.clone());
            list[idx].used_by.insert(o.location.clone());
        }
        for list in groups.into_values() {
            for g in list {
                let module = common_prefix(&g.modules);
                let name = type_name(&g.base);
                let tref = self.prop_string_type(&module, &name, &g);
                for v in &g.variants {
                    self.prop_types
                        .insert((g.base.clone(), v.clone()), tref.clone());
                }
            }
        }
    }

    /// An enum used by several operations is shared: named after its field and placed in the
    /// innermost module that holds all its users. An enum used by one operation, or whose shared
    /// name would be claimed by another enum of the same field name in the same module, belongs
    /// to each operation and is named `{Op}{Field}`.
    fn shared_enums(&mut self, spec: &Spec) {
        let mut uses = EnumUses::new();
        for (node, method) in spec.operations() {
            let m = module_of(&node.path);
            let key = format!("{} {}", method.verb, node.path);
            collect_enums(&method.parameters, "", &m, &key, &mut uses);
            collect_enums(&method.returns, "", &m, &key, &mut uses);
        }
        // Where each shared enum would go; a (module, name) claimed twice is not shared at all.
        let mut slots: BTreeMap<(ModPath, String), usize> = BTreeMap::new();
        for ((name, _), (modules, ops)) in &uses {
            if ops.len() >= 2 {
                *slots
                    .entry((common_prefix(modules), type_name(name)))
                    .or_default() += 1;
            }
        }
        for ((name, joined), (modules, ops)) in uses {
            if ops.len() < 2 {
                continue;
            }
            let module = common_prefix(&modules);
            let slot = (module.clone(), type_name(&name));
            if slots.get(&slot) != Some(&1) || self.defined.contains_key(&slot) {
                continue;
            }
            let values: Vec<String> = joined.split('\u{1f}').map(str::to_owned).collect();
            let loc = format!(
                "enum \"{name}\" shared by {}",
                ops.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            let mut def = self.enum_def(&type_name(&name), &values, &loc);
            def.facts = vec![format!(
                "Values of `{name}`, shared by {} operations; `Other` holds any value a newer PVE adds.",
                ops.len()
            )];
            let r = self.define(&module, def);
            self.shared_enums.insert((name, joined), r);
        }
    }

    fn prop_string_type(&mut self, module: &ModPath, name: &str, g: &PropGroup) -> TypeRef {
        let loc = format!(
            "property string \"{}\" ({})",
            g.base,
            g.used_by.iter().next().cloned().unwrap_or_default()
        );
        let mut fields = Vec::new();
        let mut aliases = Vec::new();
        let mut default_key = None;
        let mut rust_names = BTreeSet::new();
        for (key, s) in &g.keys {
            if let Some(alias) = &s.alias {
                if !g.keys.contains_key(alias) {
                    self.diags.push(
                        format!("{loc} key \"{key}\""),
                        format!("alias of unknown key \"{alias}\""),
                    );
                }
                aliases.push((key.clone(), alias.clone(), s.key_alias.clone()));
                continue;
            }
            if s.default_key {
                if let Some(other) = &default_key {
                    self.diags.push(
                        format!("{loc} key \"{key}\""),
                        format!("a second default key (first: \"{other}\")"),
                    );
                }
                default_key = Some(key.clone());
            }
            let rust = snake(key);
            if let Some(why) = crate::names::ident_problem(&rust) {
                self.diags.push(
                    format!("{loc} key \"{key}\""),
                    format!("key \"{key}\" becomes `{rust}`, {why}"),
                );
            }
            if !rust_names.insert(rust.clone()) {
                self.diags.push(
                    format!("{loc} key \"{key}\""),
                    format!("field name collision: {rust}"),
                );
            }
            let ty = match (s.ty.as_deref(), &s.enum_values) {
                (_, Some(values)) => {
                    let ename = format!("{}{}", pascal(&g.base), pascal(key));
                    let def = self.enum_def(&ename, values, &format!("{loc} key \"{key}\""));
                    Ty::Named(self.define(module, def))
                }
                (Some("boolean"), None) => Ty::Boolean,
                (Some("integer"), None) => Ty::Integer,
                (Some("number"), None) => Ty::Number,
                (Some("string"), None) => Ty::String,
                (other, None) => {
                    self.diags.push(
                        format!("{loc} key \"{key}\""),
                        format!("impossible type {other:?} for a property-string key"),
                    );
                    Ty::String
                }
            };
            let mut facts = schema_facts(s);
            if s.default_key {
                facts.insert(0, "default key (may be written without `key=`)".to_owned());
            }
            fields.push(PropField {
                key: key.clone(),
                rust,
                ty,
                required: !s.optional && !g.partial.contains(key),
                facts,
            });
        }
        let mut other_keys = "other_keys".to_owned();
        while rust_names.contains(&other_keys) {
            other_keys.push('_');
        }
        let mut facts = vec![format!("Property string `{}`.", g.base)];
        facts.push(format!(
            "Used by: {}.",
            g.used_by
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let def = TypeDef {
            name: name.to_owned(),
            kind: TypeKind::PropString(PropString {
                fields,
                default_key,
                aliases,
                other_keys,
                used_by: g.used_by.iter().cloned().collect(),
            }),
            facts,
            location: loc,
        };
        self.define(module, def)
    }

    fn enum_def(&mut self, name: &str, values: &[String], loc: &str) -> TypeDef {
        let mut variants = Vec::new();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for v in values {
            let mut rust = variant_name(v);
            if rust == "Other" {
                // `Other(String)` is the open enum's arm for values the schema does not list.
                rust.push('_');
            }
            if let Some(other) = seen.get(&rust) {
                if other != v {
                    self.diags.push(
                        loc,
                        format!("enum variant collision: \"{other}\" and \"{v}\" are both {rust}"),
                    );
                }
                continue;
            }
            seen.insert(rust.clone(), v.clone());
            variants.push((rust, v.clone()));
        }
        TypeDef {
            name: name.to_owned(),
            kind: TypeKind::Enum { variants },
            facts: Vec::new(),
            location: loc.to_owned(),
        }
    }

    fn index_spec(&mut self, base: &str, loc: &str) -> String {
        let name = type_name(base);
        if let Some(spec) = self.index_specs.get(&name) {
            if spec.prefix != base {
                self.diags.push(
                    loc,
                    format!("index spec name collision: {} and {base}", spec.prefix),
                );
            }
            return name;
        }
        match self.patches.index_bounds.get(base) {
            Some((max, source)) => {
                self.index_specs.insert(
                    name.clone(),
                    IndexSpecDef {
                        prefix: base.to_owned(),
                        max: *max,
                        source: source.clone(),
                    },
                );
            }
            None => self.diags.push(
                loc,
                format!(
                    "indexed parameter {base}[n] has no bound: add `{base} = <max>` to an index-bounds patch"
                ),
            ),
        }
        name
    }

    fn op(&mut self, node: &Node, method: &Method) {
        let module = module_of(&node.path);
        let key = format!("{} {}", method.verb, node.path);
        let (base, type_name) = match self.patches.renames.get(&key) {
            Some((name, _)) => (name.clone(), name.clone()),
            None => (
                crate::names::op_base(&method.name, &node.path),
                crate::names::op_type_name(&method.name, &node.path),
            ),
        };
        let loc = key.clone();

        let props = method.parameters.properties.clone().unwrap_or_default();
        let pparams = path_params(&node.path);
        let rest_param = self
            .patches
            .path_rest
            .contains_key(&node.path)
            .then(|| pparams.last().cloned())
            .flatten();
        let mut path_specs = Vec::new();
        for p in &pparams {
            let format = match props.get(p).and_then(|s| s.format.as_ref()) {
                Some(Format::Named(n)) if self.patches.formats.contains_key(n) => Some(n.clone()),
                _ => None,
            };
            let rest = rest_param.as_ref() == Some(p);
            if rest || format.is_some() {
                path_specs.push(PathSpec {
                    name: p.clone(),
                    rest,
                    format,
                });
            }
        }
        let mut fields = Vec::new();
        for p in &pparams {
            let (ty, mut facts, description) = match props.get(p) {
                Some(s) => {
                    let ty = self.ty(
                        s,
                        &format!("{base}{}", pascal(p)),
                        &module,
                        &format!("{loc} param \"{p}\""),
                        &key,
                        p,
                    );
                    (ty, schema_facts(s), s.description.clone())
                }
                None => (Ty::String, Vec::new(), None),
            };
            facts.insert(0, "path parameter".to_owned());
            fields.push(Field {
                wire: p.clone(),
                rust: snake(p),
                ty,
                required: true,
                flatten: false,
                path_param: true,
                facts,
                description: self.prose(description),
            });
        }
        let rest: BTreeMap<String, Schema> = props
            .into_iter()
            .filter(|(k, _)| !pparams.contains(k))
            .collect();
        let mut more = self.fields(&rest, &base, &module, &format!("{loc} param"), &key);
        fields.append(&mut more);
        self.check_field_names(&fields, &format!("{loc} parameters"));

        let response_name = format!("{base}Response");
        let returns_task = self.patches.tasks.contains(&key);
        let response = if returns_task {
            // PBS: an `#[api]` without `returns` is dumped as `null` whatever the handler answers.
            let pbs_untyped = self.dialect == crate::raw::Dialect::Pbs
                && method.returns.ty.as_deref() == Some("null");
            if method.returns.ty.as_deref() != Some("string") && !pbs_untyped {
                self.diags.push(
                    format!("{loc} returns"),
                    "the tasks patch names this operation, but its answer is not a string",
                );
            }
            if method.returns.optional {
                // `update_vm_async` answers a UPID, or null when there was nothing to do.
                Ty::Option(Box::new(Ty::Upid))
            } else {
                Ty::Upid
            }
        } else {
            self.response(
                &method.returns,
                &response_name,
                &module,
                &format!("{loc} returns"),
                &key,
            )
        };
        let (check, user) = match &method.permissions {
            Some(p) => (p.check.as_ref().map(Value::to_string), p.user.clone()),
            None => (None, None),
        };
        let since = self
            .opts
            .since
            .get(&key)
            .copied()
            .unwrap_or(self.opts.version);
        let op = Op {
            verb: method.verb.clone(),
            path: node.path.clone(),
            handler: method.name.clone(),
            type_name: type_name.clone(),
            response_name: response_name.clone(),
            error_name: format!("{base}Error"),
            fields,
            response,
            permission_check: check,
            permission_user: user,
            protected: method.protected,
            proxyto: method.proxyto.clone(),
            allowtoken: method.allowtoken,
            since,
            returns_task,
            declarable: self.patches.families.values().any(|f| f.create == key),
            error_variants: self
                .patches
                .errors
                .values()
                .filter(|v| v.operations.contains(&key))
                .map(|v| v.name.clone())
                .collect(),
            absent_variants: self
                .patches
                .errors
                .values()
                .filter(|v| v.absence.contains(&key))
                .map(|v| v.name.clone())
                .collect(),
            path_specs,
            description: self.prose(method.description.clone()),
        };
        for name in [&op.type_name, &op.error_name] {
            self.claim(&module, name, &loc);
        }
        if !matches!(&op.response, Ty::Named(r) if r.name == response_name && r.module == module) {
            self.claim(&module, &response_name, &loc);
        }
        self.modules.entry(module).or_default().ops.push(op);
    }

    fn claim(&mut self, module: &ModPath, name: &str, loc: &str) {
        let key = (module.clone(), name.to_owned());
        if let Some(other) = self.defined.get(&key) {
            self.diags.push(
                loc,
                format!(
                    "type name collision: {name} in module {} is also defined by {other}",
                    display_mod(module)
                ),
            );
        } else {
            self.defined.insert(key, loc.to_owned());
        }
    }

    fn prose(&self, text: Option<String>) -> Option<String> {
        if self.opts.upstream_docs {
            text
        } else {
            None
        }
    }

    fn check_field_names(&mut self, fields: &[Field], loc: &str) {
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for f in fields {
            if let Some(why) = crate::names::ident_problem(&f.rust) {
                self.diags.push(
                    format!("{loc} \"{}\"", f.wire),
                    format!("field \"{}\" becomes `{}`, {why}", f.wire, f.rust),
                );
            }
            if let Some(other) = seen.insert(&f.rust, &f.wire) {
                self.diags.push(
                    loc,
                    format!(
                        "field name collision: \"{other}\" and \"{}\" are both `{}`",
                        f.wire, f.rust
                    ),
                );
            }
        }
    }

    /// The type of an operation's answer. Its fields are optional unless a `response-fields`
    /// patch says PVE always sends them: PVE does not check answers against the schema
    /// (pve-common `src/PVE/RESTHandler.pm`, `handle`: the result is only verified when
    /// `$PVE::RESTHandler::verify_result` is set, never by the HTTP servers), so a field the
    /// schema calls required may be missing or null.
    fn response(&mut self, s: &Schema, name: &str, module: &ModPath, loc: &str, key: &str) -> Ty {
        self.answer = Some(AnswerPath {
            op: key.to_owned(),
            stack: Vec::new(),
        });
        let ty = self.ty(s, name, module, loc, key, "");
        self.answer = None;
        ty
    }

    /// In an answer: the patch for the field at the current path, marked as used.
    fn answer_patch(&mut self) -> Option<&'a crate::patch::ResponseField> {
        let a = self.answer.as_ref()?;
        let path = a.render();
        let found = self.patches.response_fields.get(&a.op)?.get(&path)?;
        self.answer_hits.insert((a.op.clone(), path));
        Some(found)
    }

    /// Whether a field with schema `s` at the current place is required: in requests as the
    /// schema says; in answers only where a patch says PVE always sends it.
    fn required_here(&mut self, s: &Schema) -> bool {
        if self.answer.is_none() {
            return !s.optional;
        }
        let patched = self.answer_patch().is_some_and(|p| p.required);
        if patched {
            self.answer_stats.kept_required += 1;
        } else if !s.optional {
            self.answer_stats.made_optional += 1;
        }
        patched
    }

    fn answer_push(&mut self, part: &str) {
        if let Some(a) = &mut self.answer {
            a.stack.push(part.to_owned());
        }
    }

    fn answer_pop(&mut self) {
        if let Some(a) = &mut self.answer {
            a.stack.pop();
        }
    }

    /// In an answer, the last path part becomes `wire` (the field being lowered).
    fn answer_set_last(&mut self, wire: &str) {
        if let Some(last) = self.answer.as_mut().and_then(|a| a.stack.last_mut()) {
            wire.clone_into(last);
        }
    }

    /// Fields of an object: plain, indexed (flattened maps) and tagged unions.
    fn fields(
        &mut self,
        props: &BTreeMap<String, Schema>,
        hint: &str,
        module: &ModPath,
        loc: &str,
        key: &str,
    ) -> Vec<Field> {
        let mut out = Vec::new();
        // A tagged union: some properties name a `type-property`.
        let tags: BTreeSet<&String> = props
            .values()
            .filter_map(|s| s.type_property.as_ref())
            .collect();
        let union_tag = match tags.len() {
            0 => None,
            1 => tags.into_iter().next().cloned(),
            _ => {
                self.diags.push(
                    loc,
                    format!("properties name different type-properties: {tags:?}"),
                );
                None
            }
        };
        let union_tag = union_tag.filter(|t| props.contains_key(t));
        let mut variant_fields: BTreeMap<String, Vec<Field>> = BTreeMap::new();
        self.answer_push("");
        for (wire, s) in props {
            self.answer_set_last(wire);
            let floc = format!("{loc} \"{wire}\"");
            if union_tag.as_ref() == Some(wire) {
                continue;
            }
            if s.type_property.is_some() && union_tag.is_some() {
                let mut placed = false;
                if let Some(types) = &s.instance_types {
                    for t in types {
                        let f = self.field(
                            wire,
                            s,
                            &format!("{hint}{}", pascal(t)),
                            module,
                            &floc,
                            key,
                        );
                        variant_fields.entry(t.clone()).or_default().push(f);
                    }
                    placed = true;
                }
                if let Some(alts) = &s.one_of {
                    for (i, alt) in alts.iter().enumerate() {
                        let mut alt = alt.clone();
                        alt.optional |= s.optional;
                        let lookup = alternative_name(&alt, wire);
                        for t in alt.instance_types.clone().unwrap_or_default() {
                            let mut f = self.field(
                                &lookup,
                                &alt,
                                &format!("{hint}{}", pascal(&t)),
                                module,
                                &format!("{floc} oneOf[{i}]"),
                                key,
                            );
                            f.wire = wire.clone();
                            f.rust = snake(wire);
                            variant_fields.entry(t.clone()).or_default().push(f);
                        }
                    }
                    placed = true;
                }
                if placed {
                    continue;
                }
            }
            if let Some(base) = indexed_base(wire) {
                let spec = self.index_spec(base, &floc);
                let item = self.ty(
                    s,
                    &format!("{hint}{}", pascal(base)),
                    module,
                    &floc,
                    key,
                    wire,
                );
                let rust = if props.contains_key(base) {
                    format!("{}_n", snake(base))
                } else {
                    snake(base)
                };
                let mut facts = schema_facts(s);
                facts.insert(0, format!("indexed: keys `{base}0`, `{base}1`, ..."));
                out.push(Field {
                    wire: wire.clone(),
                    rust,
                    ty: Ty::Indexed {
                        item: Box::new(item),
                        spec,
                    },
                    required: false,
                    flatten: true,
                    path_param: false,
                    facts,
                    description: self.prose(s.description.clone()),
                });
                continue;
            }
            out.push(self.field(wire, s, hint, module, &floc, key));
        }
        if let Some(tag) = &union_tag {
            self.answer_set_last(tag);
        }
        let tag_required = union_tag.as_ref().map(|t| self.required_here(&props[t]));
        self.answer_pop();
        if let Some(tag) = union_tag {
            let tag_schema = &props[&tag];
            let mut values: Vec<String> = tag_schema.enum_values.clone().unwrap_or_default();
            for t in variant_fields.keys() {
                if !values.contains(t) {
                    values.push(t.clone());
                }
            }
            let ename = format!("{hint}{}", pascal(&tag));
            let tloc = format!("{loc} \"{tag}\" (union)");
            let mut variants = Vec::new();
            let mut seen = BTreeSet::new();
            for v in values {
                let rust = variant_name(&v);
                if !seen.insert(rust.clone()) {
                    self.diags
                        .push(&tloc, format!("union variant collision: {rust}"));
                    continue;
                }
                let fields = variant_fields.remove(&v).unwrap_or_default();
                self.check_field_names(&fields, &tloc);
                self.claim(module, &format!("{ename}{rust}"), &tloc);
                variants.push((v, rust, fields));
            }
            let def = TypeDef {
                name: ename,
                kind: TypeKind::Tagged {
                    tag: tag.clone(),
                    variants,
                },
                facts: vec![format!("Selected by `{tag}`.")],
                location: tloc,
            };
            let tref = self.define(module, def);
            let mut facts = schema_facts(tag_schema);
            facts.insert(
                0,
                "union tag: each variant carries its own fields".to_owned(),
            );
            out.push(Field {
                wire: tag.clone(),
                rust: snake(&tag),
                ty: Ty::Named(tref),
                required: tag_required.unwrap_or(!tag_schema.optional),
                flatten: true,
                path_param: false,
                facts,
                description: self.prose(tag_schema.description.clone()),
            });
        }
        out
    }

    fn field(
        &mut self,
        wire: &str,
        s: &Schema,
        hint: &str,
        module: &ModPath,
        loc: &str,
        key: &str,
    ) -> Field {
        let retyped = self.answer_patch().and_then(|p| p.schema.as_ref());
        if retyped.is_some() {
            self.answer_stats.retyped += 1;
        }
        let s = retyped.unwrap_or(s);
        let required = self.required_here(s);
        let ty = self.ty(
            s,
            &format!("{hint}{}", pascal(wire)),
            module,
            loc,
            key,
            wire,
        );
        let mut facts = schema_facts(s);
        if ty == Ty::Secret {
            facts.insert(0, "secret: Debug and Display print `[redacted]`".to_owned());
        }
        Field {
            wire: wire.to_owned(),
            rust: snake(wire),
            ty,
            required,
            flatten: false,
            path_param: false,
            facts,
            description: self.prose(s.description.clone()),
        }
    }

    /// The type of a schema; defines enums and structs it needs under `hint`.
    fn ty(
        &mut self,
        s: &Schema,
        hint: &str,
        module: &ModPath,
        loc: &str,
        key: &str,
        wire: &str,
    ) -> Ty {
        if let Some(Format::Inline(keys)) = &s.format {
            let base = indexed_base(wire).unwrap_or(wire).to_owned();
            return match self.prop_types.get(&(base, canon_of(keys))) {
                Some(t) => Ty::Named(t.clone()),
                None => {
                    self.diags
                        .push(loc, "internal: property string was not collected");
                    Ty::String
                }
            };
        }
        let ty = match s.ty.as_deref() {
            Some(t) => t,
            None if s.properties.is_some() => "object",
            None if s.items.is_some() => "array",
            None if s.enum_values.is_some() => "string",
            None => {
                self.fallback(loc, "the schema gives no type");
                return Ty::Value;
            }
        };
        match ty {
            "string" => {
                let base = indexed_base(wire).unwrap_or(wire);
                if self.patches.is_secret(key, base) {
                    let scoped = (key.to_owned(), base.to_owned());
                    let hit = if self.patches.secret_scoped.contains(&scoped) {
                        scoped
                    } else {
                        (String::new(), base.to_owned())
                    };
                    self.secret_hits.insert(hit);
                    return Ty::Secret;
                }
                match &s.enum_values {
                    Some(values) => {
                        if let Some(r) = self.shared_enums.get(&enum_key(wire, values)) {
                            return Ty::Named(r.clone());
                        }
                        let def = self.enum_def(hint, values, loc);
                        Ty::Named(self.define(module, def))
                    }
                    None => Ty::String,
                }
            }
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            "null" => Ty::Unit,
            "any" => {
                self.fallback(loc, "the schema says type \"any\"");
                Ty::Value
            }
            "array" => match &s.items {
                Some(items) => {
                    self.answer_push("[]");
                    let item = self.ty(
                        items,
                        &format!("{hint}Item"),
                        module,
                        &format!("{loc} items"),
                        key,
                        wire,
                    );
                    self.answer_pop();
                    Ty::Vec(Box::new(item))
                }
                None => {
                    self.fallback(loc, "an array without \"items\"");
                    Ty::Vec(Box::new(Ty::Value))
                }
            },
            "object" => {
                let props = s.properties.clone().unwrap_or_default();
                if !props.is_empty() {
                    let fields = self.fields(&props, hint, module, loc, key);
                    self.check_field_names(&fields, loc);
                    let def = TypeDef {
                        name: hint.to_owned(),
                        kind: TypeKind::Struct { fields },
                        facts: Vec::new(),
                        location: loc.to_owned(),
                    };
                    return Ty::Named(self.define(module, def));
                }
                match &s.additional_properties {
                    Some(AdditionalProperties::Schema(ap)) => {
                        self.answer_push("{}");
                        let v = self.ty(
                            ap,
                            &format!("{hint}Value"),
                            module,
                            &format!("{loc} additionalProperties"),
                            key,
                            wire,
                        );
                        self.answer_pop();
                        Ty::Map(Box::new(v))
                    }
                    _ => {
                        self.fallback(loc, "an object without \"properties\"");
                        Ty::JsonObject
                    }
                }
            }
            other => {
                self.diags.push(loc, format!("impossible type \"{other}\""));
                Ty::Value
            }
        }
    }
}

/// The schema's methods that are not REST operations, with why.
fn not_generated(spec: &Spec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for root in &spec.protocol_roots {
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            for verb in n.info.keys() {
                out.push((
                    format!("{verb} {}", n.path),
                    "answered only inside the upgraded backup/reader protocol connection"
                        .to_owned(),
                ));
            }
            stack.extend(n.children.iter());
        }
    }
    for key in &spec.streamed {
        out.push((
            key.clone(),
            "its handler writes its own HTTP body (a file or a connection upgrade), not a JSON envelope".to_owned(),
        ));
    }
    out.sort();
    out
}

fn display_mod(m: &ModPath) -> String {
    if m.is_empty() {
        "generated".to_owned()
    } else {
        m.join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_and_path_params() {
        assert_eq!(
            module_of("/nodes/{node}/network/{iface}"),
            ["nodes", "node", "network", "iface"]
        );
        assert_eq!(
            module_of("/cluster/sdn/route-maps"),
            ["cluster", "sdn", "route_maps"]
        );
        assert_eq!(
            path_params("/nodes/{node}/qemu/{vmid}/config"),
            ["node", "vmid"]
        );
        assert!(path_params("/version").is_empty());
    }

    #[test]
    fn common_prefix_of_modules() {
        let a = module_of("/nodes/{node}/qemu");
        let b = module_of("/nodes/{node}/qemu/{vmid}/config");
        let c = module_of("/nodes/{node}/lxc");
        assert_eq!(common_prefix(&[a.clone(), b]), a);
        assert_eq!(common_prefix(&[a, c]), ["nodes", "node"]);
    }
}
