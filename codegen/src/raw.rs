//! Stage `load`: PVE's schema array as a raw mirror.
//!
//! The JSON is walked by hand rather than derived so that every problem is collected (not just
//! the first) and named by its schema location, and so that no key vanishes: a key this mirror
//! does not know is an error.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::diag::Diagnostics;

/// Which product's schema, told apart by its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Proxmox VE: written by Perl (`PVE::RESTHandler`), one root per top-level path, every
    /// method named, booleans `0`/`1`.
    #[default]
    Pve,
    /// Proxmox Backup Server: written by Rust (`proxmox-schema`'s API dump), one root `/`
    /// (plus the backup and reader protocols' `_upgrade_` roots), methods without handler
    /// names and with `unstable`, inline formats written as whole schemas, patterns as
    /// `/^...$/`, permissions as `check` objects, `or` and `and`.
    Pbs,
}

impl Dialect {
    /// `pve` or `pbs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Pve => "pve",
            Dialect::Pbs => "pbs",
        }
    }

    /// The product's name in prose.
    pub fn product(self) -> &'static str {
        match self {
            Dialect::Pve => "PVE",
            Dialect::Pbs => "PBS",
        }
    }
}

/// A loaded schema file.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The file name it was loaded from (`pve-9.2.json`).
    pub file_name: String,
    /// SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
    /// Whose schema it is.
    pub dialect: Dialect,
    /// The top-level tree nodes (`/cluster`, `/nodes`, ...; PBS: `/`).
    pub roots: Vec<Node>,
    /// PBS: the roots of protocols a connection upgrades to (`/backup/_upgrade_`,
    /// `/reader/_upgrade_`). Their methods are answered only inside an upgraded HTTP/2
    /// connection, never as REST calls, so no operation is generated for them; they are kept
    /// to be counted.
    pub protocol_roots: Vec<Node>,
    /// PBS: REST methods whose handler writes its own HTTP body (`DOWNLOAD`/`UPLOAD`): a file,
    /// a protocol or websocket upgrade. No operation is generated for them (the runtime reads
    /// JSON envelopes); kept as `METHOD /path` to be counted.
    pub streamed: Vec<String>,
}

/// PBS `DOWNLOAD` methods that answer a JSON envelope all the same, so they are operations:
/// the task log answers `{"data": [{n, t}], "total": N}` unless `download` is set
/// (proxmox-backup `src/api2/node/tasks.rs`, `read_task_log`).
pub const PBS_JSON_TRANSFERS: &[&str] = &["GET /nodes/{node}/tasks/{upid}/log"];

/// One node of the API tree: a path and the methods it serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Path template, e.g. `/nodes/{node}/network/{iface}`.
    pub path: String,
    /// The last path segment as the viewer shows it.
    pub text: String,
    /// Whether the node has no children.
    pub leaf: bool,
    /// Methods by HTTP verb.
    pub info: BTreeMap<String, Method>,
    /// Child nodes.
    pub children: Vec<Node>,
}

/// One operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Method {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub verb: String,
    /// Handler name, e.g. `update_network`.
    pub name: String,
    /// Upstream prose (never committed; `--docs upstream` only).
    pub description: Option<String>,
    /// Whether API tokens may call it.
    pub allowtoken: bool,
    /// Whether it runs in the privileged daemon.
    pub protected: bool,
    /// The parameter naming the node the call is proxied to.
    pub proxyto: Option<String>,
    /// The permission facts.
    pub permissions: Option<Permissions>,
    /// The parameters object.
    pub parameters: Schema,
    /// The `data` of a successful answer.
    pub returns: Schema,
    /// Whether the handler receives the caller's credentials.
    pub expose_credentials: bool,
    /// Whether the answer may be a file download.
    pub download_allowed: bool,
    /// PBS: whether upstream marks the method unstable.
    pub unstable: bool,
    /// PBS: `DOWNLOAD` or `UPLOAD` when the method streams a file instead of answering JSON
    /// (listed under `GET` or `POST`).
    pub transfer: Option<String>,
}

/// Permission facts of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Permissions {
    /// The check expression, e.g. `["perm","/nodes/{node}",["Sys.Modify"]]`.
    pub check: Option<Value>,
    /// `all` when every authenticated user may call it.
    pub user: Option<String>,
    /// Upstream prose (never committed).
    pub description: Option<String>,
}

/// `format`: a named format or an inline property-string format.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// A named format such as `pve-node`.
    Named(String),
    /// An inline property-string format: its keys.
    Inline(BTreeMap<String, Schema>),
    /// PBS: a string holding a list (`[a|b, ...]`), whose items follow this schema.
    List(Box<Schema>),
}

/// `additionalProperties`.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    /// `0`/`1`.
    Allowed(bool),
    /// A schema for every additional value.
    Schema(Box<Schema>),
}

/// A JSON-schema-like node as PVE writes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// `type`.
    pub ty: Option<String>,
    /// `optional`.
    pub optional: bool,
    /// Upstream prose.
    pub description: Option<String>,
    /// Upstream prose.
    pub verbose_description: Option<String>,
    /// Upstream short label.
    pub title: Option<String>,
    /// The viewer's type text.
    pub typetext: Option<String>,
    /// The viewer's format label.
    pub format_description: Option<String>,
    /// `format`.
    pub format: Option<Format>,
    /// `default`.
    pub default: Option<Value>,
    /// `enum`, as text.
    pub enum_values: Option<Vec<String>>,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `pattern` (a Perl regex).
    pub pattern: Option<String>,
    /// `properties`.
    pub properties: Option<BTreeMap<String, Schema>>,
    /// `additionalProperties`.
    pub additional_properties: Option<AdditionalProperties>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `alias`: this key is another name for that key.
    pub alias: Option<String>,
    /// `keyAlias`: with `alias`, the key that receives this key's name.
    pub key_alias: Option<String>,
    /// `default_key`.
    pub default_key: bool,
    /// PBS: an object schema's `default_key`, naming the property that is the default key
    /// (moved onto that property as `default_key` when the object is an inline format).
    pub default_key_name: Option<String>,
    /// `requires`: another key that must be set with this one.
    pub requires: Option<String>,
    /// `type-property`: the sibling whose value selects a variant.
    pub type_property: Option<String>,
    /// `instance-types`: the variants this property belongs to.
    pub instance_types: Option<Vec<String>>,
    /// `oneOf`: per-variant alternatives.
    pub one_of: Option<Vec<Schema>>,
    /// `links` (viewer hints; kept, unused).
    pub links: Option<Value>,
    /// `renderer` (viewer hint; kept, unused).
    pub renderer: Option<String>,
    /// `min` / `max` (present upstream on a few keys; kept as facts).
    pub min: Option<f64>,
    /// See `min`.
    pub max: Option<f64>,
}

const TYPES: &[&str] = &[
    "string", "integer", "number", "boolean", "object", "array", "null", "any",
];

struct Walker {
    diags: Diagnostics,
    dialect: Dialect,
    streamed: Vec<String>,
}

impl Walker {
    fn flag(&mut self, loc: &str, key: &str, v: &Value) -> bool {
        match v {
            Value::Bool(b) => *b,
            Value::Number(n) if n.as_u64() == Some(0) => false,
            Value::Number(n) if n.as_u64() == Some(1) => true,
            Value::String(s) if s == "0" || s == "1" => s == "1",
            other => {
                self.diags.push(
                    loc,
                    format!(
                        "key \"{key}\" must be 0/1 or a boolean, found {}",
                        kind(other)
                    ),
                );
                false
            }
        }
    }

    fn string(&mut self, loc: &str, key: &str, v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.diags.push(
                    loc,
                    format!("key \"{key}\" must be a string, found {}", kind(other)),
                );
                None
            }
        }
    }

    fn number(&mut self, loc: &str, key: &str, v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => match s.parse::<f64>() {
                Ok(f) => Some(f),
                Err(_) => {
                    self.diags.push(
                        loc,
                        format!("key \"{key}\" must be a number, found \"{s}\""),
                    );
                    None
                }
            },
            other => {
                self.diags.push(
                    loc,
                    format!("key \"{key}\" must be a number, found {}", kind(other)),
                );
                None
            }
        }
    }

    fn count(&mut self, loc: &str, key: &str, v: &Value) -> Option<u64> {
        match v.as_u64() {
            Some(n) => Some(n),
            None => {
                self.diags.push(
                    loc,
                    format!(
                        "key \"{key}\" must be a non-negative integer, found {}",
                        kind(v)
                    ),
                );
                None
            }
        }
    }

    fn strings(&mut self, loc: &str, key: &str, v: &Value) -> Option<Vec<String>> {
        let Value::Array(items) = v else {
            self.diags.push(
                loc,
                format!("key \"{key}\" must be an array, found {}", kind(v)),
            );
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::String(s) => out.push(s.clone()),
                Value::Number(n) => out.push(n.to_string()),
                other => {
                    self.diags.push(
                        loc,
                        format!("key \"{key}\" must hold strings, found {}", kind(other)),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    fn object<'v>(
        &mut self,
        loc: &str,
        what: &str,
        v: &'v Value,
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.diags.push(
                    loc,
                    format!("{what} must be an object, found {}", kind(other)),
                );
                None
            }
        }
    }

    fn schema(&mut self, loc: &str, v: &Value) -> Schema {
        let mut s = Schema::default();
        let Some(m) = self.object(loc, "a schema", v) else {
            return s;
        };
        for (key, val) in m {
            if val.is_null() {
                // Upstream writes `null` for "not set" (e.g. `enum: null`).
                continue;
            }
            match key.as_str() {
                "type" => {
                    s.ty = self.string(loc, key, val);
                    if let Some(t) = &s.ty {
                        if !TYPES.contains(&t.as_str()) {
                            self.diags.push(loc, format!("impossible type \"{t}\""));
                        }
                    }
                }
                "optional" => s.optional = self.flag(loc, key, val),
                "description" => s.description = self.string(loc, key, val),
                "verbose_description" => s.verbose_description = self.string(loc, key, val),
                "title" => s.title = self.string(loc, key, val),
                "typetext" => s.typetext = self.string(loc, key, val),
                "format_description" => s.format_description = self.string(loc, key, val),
                "format" => {
                    s.format = match val {
                        Value::String(name) => Some(Format::Named(name.clone())),
                        Value::Object(_) if self.dialect == Dialect::Pbs => {
                            self.pbs_format(&format!("{loc} format"), val)
                        }
                        Value::Object(keys) => {
                            let mut out = BTreeMap::new();
                            for (k, kv) in keys {
                                let kloc = format!("{loc} format key \"{k}\"");
                                out.insert(k.clone(), self.schema(&kloc, kv));
                            }
                            Some(Format::Inline(out))
                        }
                        other => {
                            self.diags.push(
                                loc,
                                format!(
                                    "key \"format\" must be a name or an object, found {}",
                                    kind(other)
                                ),
                            );
                            None
                        }
                    }
                }
                "default" => s.default = Some(val.clone()),
                "enum" => s.enum_values = self.strings(loc, key, val),
                "minimum" => s.minimum = self.number(loc, key, val),
                "maximum" => s.maximum = self.number(loc, key, val),
                "min" => s.min = self.number(loc, key, val),
                "max" => s.max = self.number(loc, key, val),
                "minLength" => s.min_length = self.count(loc, key, val),
                "maxLength" => s.max_length = self.count(loc, key, val),
                "pattern" => {
                    s.pattern = self.string(loc, key, val).map(|p| match self.dialect {
                        // proxmox-schema writes a regex as `/^...$/`: the delimiters go.
                        Dialect::Pbs => p
                            .strip_prefix('/')
                            .and_then(|p| p.strip_suffix('/'))
                            .map(str::to_owned)
                            .unwrap_or(p),
                        Dialect::Pve => p,
                    })
                }
                "properties" => {
                    if let Some(props) = self.object(loc, "key \"properties\"", val) {
                        let mut out = BTreeMap::new();
                        for (k, pv) in props {
                            let ploc = format!("{loc} property \"{k}\"");
                            out.insert(k.clone(), self.schema(&ploc, pv));
                        }
                        s.properties = Some(out);
                    }
                }
                "additionalProperties" => {
                    s.additional_properties = match val {
                        Value::Object(_) => Some(AdditionalProperties::Schema(Box::new(
                            self.schema(&format!("{loc} additionalProperties"), val),
                        ))),
                        other => Some(AdditionalProperties::Allowed(self.flag(loc, key, other))),
                    }
                }
                "items" => {
                    s.items = Some(Box::new(self.schema(&format!("{loc} items"), val)));
                }
                "alias" => s.alias = self.string(loc, key, val),
                "keyAlias" => s.key_alias = self.string(loc, key, val),
                "default_key" if self.dialect == Dialect::Pbs && val.is_string() => {
                    s.default_key_name = self.string(loc, key, val);
                }
                "default_key" => s.default_key = self.flag(loc, key, val),
                "requires" => s.requires = self.string(loc, key, val),
                "type-property" => s.type_property = self.string(loc, key, val),
                "instance-types" => s.instance_types = self.strings(loc, key, val),
                "oneOf" => {
                    if let Value::Array(alts) = val {
                        s.one_of = Some(
                            alts.iter()
                                .enumerate()
                                .map(|(i, a)| self.schema(&format!("{loc} oneOf[{i}]"), a))
                                .collect(),
                        );
                    } else {
                        self.diags.push(
                            loc,
                            format!("key \"oneOf\" must be an array, found {}", kind(val)),
                        );
                    }
                }
                "links" => s.links = Some(val.clone()),
                "renderer" => s.renderer = self.string(loc, key, val),
                other => self
                    .diags
                    .push(loc, format!("unknown schema key \"{other}\"")),
            }
        }
        s
    }

    /// PBS's inline format, written as a whole schema: an object's properties are a property
    /// string's keys; an array's items are a list string's items.
    fn pbs_format(&mut self, loc: &str, v: &Value) -> Option<Format> {
        let inner = self.schema(loc, v);
        match inner.ty.as_deref() {
            Some("object") => {
                let mut keys = inner.properties.unwrap_or_default();
                if let Some(name) = &inner.default_key_name {
                    match keys.get_mut(name) {
                        Some(k) => k.default_key = true,
                        None => self.diags.push(
                            loc,
                            format!("default_key \"{name}\" names no property of the format"),
                        ),
                    }
                }
                Some(Format::Inline(keys))
            }
            Some("array") => match inner.items {
                Some(items) => Some(Format::List(items)),
                None => {
                    self.diags.push(loc, "a list format without \"items\"");
                    None
                }
            },
            other => {
                self.diags.push(
                    loc,
                    format!(
                        "an inline format must be an object or array schema, found type {other:?}"
                    ),
                );
                None
            }
        }
    }

    fn method(
        &mut self,
        path: &str,
        verb: &str,
        v: &Value,
        has_param_child: bool,
    ) -> Option<Method> {
        let loc = format!("{verb} {path}");
        let m = self.object(&loc, "a method", v)?;
        let mut out = Method {
            verb: verb.to_owned(),
            name: String::new(),
            description: None,
            allowtoken: false,
            protected: false,
            proxyto: None,
            permissions: None,
            parameters: Schema::default(),
            returns: Schema::default(),
            expose_credentials: false,
            download_allowed: false,
            unstable: false,
            transfer: None,
        };
        let mut seen_name = false;
        for (key, val) in m {
            if val.is_null() {
                // `proxyto: null` and the like mean "not set".
                continue;
            }
            match key.as_str() {
                "name" => {
                    seen_name = true;
                    out.name = self.string(&loc, key, val).unwrap_or_default();
                }
                "method"
                    if self.dialect == Dialect::Pbs
                        && matches!(
                            (verb, val.as_str()),
                            ("GET", Some("DOWNLOAD")) | ("POST", Some("UPLOAD"))
                        ) =>
                {
                    out.transfer = val.as_str().map(str::to_owned);
                }
                "unstable" if self.dialect == Dialect::Pbs => {
                    out.unstable = self.flag(&loc, key, val);
                }
                "method" => {
                    if val.as_str() != Some(verb) {
                        self.diags.push(
                            &loc,
                            format!(
                                "key \"method\" is {val} but the method is listed under {verb}"
                            ),
                        );
                    }
                }
                "description" => out.description = self.string(&loc, key, val),
                "allowtoken" => out.allowtoken = self.flag(&loc, key, val),
                "protected" => out.protected = self.flag(&loc, key, val),
                "proxyto" => out.proxyto = self.string(&loc, key, val),
                "expose_credentials" => out.expose_credentials = self.flag(&loc, key, val),
                "download_allowed" => out.download_allowed = self.flag(&loc, key, val),
                "parameters" => out.parameters = self.schema(&format!("{loc} parameters"), val),
                "returns" => out.returns = self.schema(&format!("{loc} returns"), val),
                "permissions" => {
                    let ploc = format!("{loc} permissions");
                    if let Some(pm) = self.object(&ploc, "key \"permissions\"", val) {
                        let mut p = Permissions {
                            check: None,
                            user: None,
                            description: None,
                        };
                        for (pk, pv) in pm {
                            match pk.as_str() {
                                "check" => p.check = Some(pv.clone()),
                                // PBS: `{"or": [...]}` / `{"and": [...]}` of checks, kept whole.
                                "or" | "and" if self.dialect == Dialect::Pbs => {
                                    let mut whole = Map::new();
                                    whole.insert(pk.clone(), pv.clone());
                                    p.check = Some(Value::Object(whole));
                                }
                                "user" => p.user = self.string(&ploc, pk, pv),
                                "description" => p.description = self.string(&ploc, pk, pv),
                                other => self
                                    .diags
                                    .push(&ploc, format!("unknown permissions key \"{other}\"")),
                            }
                        }
                        out.permissions = Some(p);
                    }
                }
                other => self
                    .diags
                    .push(&loc, format!("unknown method key \"{other}\"")),
            }
        }
        if self.dialect == Dialect::Pbs && !seen_name {
            // proxmox-schema's dump has no handler names: one is made from verb and path.
            out.name = pbs_handler_name(verb, path, has_param_child);
        } else if !seen_name || out.name.is_empty() {
            self.diags
                .push(&loc, "method has no handler name (key \"name\")");
        }
        Some(out)
    }

    fn node(&mut self, where_: &str, v: &Value) -> Option<Node> {
        let m = self.object(where_, "a tree node", v)?;
        let path = match m.get("path") {
            Some(p) => self.string(where_, "path", p).unwrap_or_default(),
            None => {
                self.diags.push(where_, "tree node has no \"path\"");
                String::new()
            }
        };
        let loc = if path.is_empty() {
            where_.to_owned()
        } else {
            format!("path {path}")
        };
        let mut node = Node {
            path: path.clone(),
            text: String::new(),
            leaf: false,
            info: BTreeMap::new(),
            children: Vec::new(),
        };
        for (key, val) in m {
            match key.as_str() {
                "path" => {}
                "text" => node.text = self.string(&loc, key, val).unwrap_or_default(),
                "leaf" => node.leaf = self.flag(&loc, key, val),
                // PBS: the viewer's tree state.
                "expanded" if self.dialect == Dialect::Pbs => {}
                "info" => {
                    if let Some(info) = self.object(&loc, "key \"info\"", val) {
                        for (verb, mv) in info {
                            if !["GET", "POST", "PUT", "DELETE"].contains(&verb.as_str()) {
                                self.diags
                                    .push(&loc, format!("unknown HTTP method \"{verb}\" in info"));
                                continue;
                            }
                            let has_param_child = m
                                .get("children")
                                .and_then(Value::as_array)
                                .is_some_and(|cs| {
                                    cs.iter().any(|c| {
                                        c.get("path").and_then(Value::as_str).is_some_and(|p| {
                                            p.rsplit('/').next().is_some_and(|l| l.starts_with('{'))
                                        })
                                    })
                                });
                            if let Some(method) = self.method(&path, verb, mv, has_param_child) {
                                let key = format!("{verb} {path}");
                                if method.transfer.is_some()
                                    && !PBS_JSON_TRANSFERS.contains(&key.as_str())
                                {
                                    self.streamed.push(key);
                                    continue;
                                }
                                node.info.insert(verb.clone(), method);
                            }
                        }
                    }
                }
                "children" => {
                    if let Value::Array(children) = val {
                        for (i, c) in children.iter().enumerate() {
                            if let Some(child) = self.node(&format!("{loc} child {i}"), c) {
                                node.children.push(child);
                            }
                        }
                    } else {
                        self.diags.push(
                            &loc,
                            format!("key \"children\" must be an array, found {}", kind(val)),
                        );
                    }
                }
                other => self
                    .diags
                    .push(&loc, format!("unknown tree node key \"{other}\"")),
            }
        }
        if self.dialect == Dialect::Pbs
            && node.info.is_empty()
            && node.children.is_empty()
            && m.get("info")
                .and_then(Value::as_object)
                .is_some_and(|i| !i.is_empty())
        {
            // Every method of this leaf was streamed: no module for it.
            return None;
        }
        Some(node)
    }
}

/// A handler name for a PBS method, which the schema does not carry: from the verb and the
/// path's last plain segment (`GET /config/datastore` -> `list_datastore`, `GET
/// /config/datastore/{name}` -> `read_datastore`, `POST /admin/datastore/{store}/prune` ->
/// `prune`). `has_param_child`: the node has a `{param}` child, so it is a collection.
pub fn pbs_handler_name(verb: &str, path: &str, has_param_child: bool) -> String {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let on_item = segs.last().is_some_and(|s| s.starts_with('{'));
    let last = segs
        .iter()
        .rev()
        .find(|s| !s.starts_with('{'))
        .map_or("root", |s| s);
    let last = last.replace(['-', '.'], "_");
    match (verb, on_item) {
        ("GET", true) => format!("read_{last}"),
        ("GET", false) if has_param_child || segs.is_empty() => format!("list_{last}"),
        ("GET", false) => format!("get_{last}"),
        ("POST", true) => format!("create_{last}"),
        ("POST", false) if has_param_child => format!("create_{last}"),
        ("POST", false) => last,
        ("PUT", _) => format!("update_{last}"),
        ("DELETE", _) => format!("delete_{last}"),
        (other, _) => format!("{}_{last}", other.to_ascii_lowercase()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// SHA-256 of `bytes` as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a schema file's bytes (the JSON array of tree nodes).
///
/// # Errors
///
/// Every problem found: malformed JSON (with line and column), wrong value types and unknown
/// keys, each with its location.
pub fn parse(file_name: &str, bytes: &[u8]) -> Result<Spec, Diagnostics> {
    let mut diags = Diagnostics::new("load");
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            diags.push(
                format!("{file_name}:{}:{}", e.line(), e.column()),
                format!("malformed JSON: {e}"),
            );
            return diags.finish(Spec {
                file_name: file_name.to_owned(),
                sha256: String::new(),
                dialect: Dialect::Pve,
                roots: Vec::new(),
                protocol_roots: Vec::new(),
                streamed: Vec::new(),
            });
        }
    };
    // proxmox-schema's dump has the root `/`; PVE's Perl one never does.
    let dialect = match &value {
        Value::Array(nodes)
            if nodes
                .iter()
                .any(|n| n.get("path").and_then(Value::as_str) == Some("/")) =>
        {
            Dialect::Pbs
        }
        _ => Dialect::Pve,
    };
    let mut w = Walker {
        diags,
        dialect,
        streamed: Vec::new(),
    };
    let mut roots = Vec::new();
    let mut protocol_roots = Vec::new();
    match &value {
        Value::Array(nodes) => {
            for (i, n) in nodes.iter().enumerate() {
                if let Some(node) = w.node(&format!("{file_name} root {i}"), n) {
                    if dialect == Dialect::Pbs && node.path.ends_with("/_upgrade_") {
                        protocol_roots.push(node);
                    } else {
                        roots.push(node);
                    }
                }
            }
        }
        other => w.diags.push(
            file_name,
            format!(
                "the schema must be an array of tree nodes, found {}",
                kind(other)
            ),
        ),
    }
    w.diags.finish(Spec {
        file_name: file_name.to_owned(),
        sha256: sha256_hex(bytes),
        dialect,
        roots,
        protocol_roots,
        streamed: w.streamed,
    })
}

/// Parses one schema (a patch's replacement type), checked as the schema file's are.
///
/// # Errors
///
/// Every problem, located under `loc`.
pub fn parse_schema(loc: &str, value: &Value) -> Result<Schema, Diagnostics> {
    let mut w = Walker {
        diags: Diagnostics::new("patch"),
        dialect: Dialect::Pve,
        streamed: Vec::new(),
    };
    let s = w.schema(loc, value);
    w.diags.finish(s)
}

/// Reads and parses a schema file.
///
/// # Errors
///
/// A missing or unreadable file, or every problem [`parse`] finds.
pub fn load(path: &std::path::Path) -> Result<Spec, Diagnostics> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    match std::fs::read(path) {
        Ok(bytes) => parse(&name, &bytes),
        Err(e) => {
            let mut d = Diagnostics::new("load");
            d.push(
                path.display().to_string(),
                format!("cannot read the schema: {e}"),
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

impl Spec {
    /// Every operation, depth first in tree order: (node, method).
    pub fn operations(&self) -> Vec<(&Node, &Method)> {
        fn walk<'a>(n: &'a Node, out: &mut Vec<(&'a Node, &'a Method)>) {
            for m in n.info.values() {
                out.push((n, m));
            }
            for c in &n.children {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        for r in &self.roots {
            walk(r, &mut out);
        }
        out
    }

    /// Every tree node, depth first.
    pub fn nodes(&self) -> Vec<&Node> {
        fn walk<'a>(n: &'a Node, out: &mut Vec<&'a Node>) {
            out.push(n);
            for c in &n.children {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        for r in &self.roots {
            walk(r, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_reported_with_its_location() {
        let json = br#"[{"path":"/a","text":"a","leaf":1,"colour":"red","info":{"GET":{
            "name":"get_a","method":"GET","parameters":{"type":"object","properties":{
              "x":{"type":"strng","bogus":1},"y":{"type":"integer","optional":"maybe"}}},
            "returns":{"type":"null"}}}}]"#;
        let err = parse("t.json", json).expect_err("has problems");
        let text: Vec<String> = err.items.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "GET /a parameters property \"x\": impossible type \"strng\"",
                "GET /a parameters property \"x\": unknown schema key \"bogus\"",
                "GET /a parameters property \"y\": key \"optional\" must be 0/1 or a boolean, found a string",
                "path /a: unknown tree node key \"colour\"",
            ]
        );
    }

    #[test]
    fn a_pbs_schema_is_read_in_its_own_dialect() {
        // The shapes proxmox-schema's dump has: root `/`, no names, `unstable`, inline formats
        // as whole schemas with a named default key, `or` permissions, DOWNLOAD, `expanded`.
        let json = br#"[
          {"path":"/","text":"","leaf":0,"expanded":true,"info":{"GET":{"method":"GET","unstable":false,
            "description":"d","parameters":{"type":"object","additionalProperties":false},"returns":{"type":"null"}}},
           "children":[
            {"path":"/config/datastore","text":"datastore","leaf":0,"info":{
              "GET":{"method":"GET","unstable":false,"parameters":{"type":"object"},"returns":{"type":"array","items":{"type":"object"}}},
              "POST":{"method":"POST","unstable":false,"permissions":{"or":[{"check":{"partial":false,"path":["datastore"],"privs":["Datastore.Allocate"]}},{"userParam":"owner"}]},
                "parameters":{"type":"object","properties":{
                  "name":{"type":"string","pattern":"/^[a-z]+$/"},
                  "tuning":{"type":"string","optional":true,"format":{"type":"object","default_key":"mode","properties":{"mode":{"type":"string"},"level":{"type":"integer","optional":true}}}},
                  "vanished":{"type":"string","optional":true,"format":{"type":"array","items":{"type":"string","enum":["acl","entry"]}}}}},
                "returns":{"type":"null"}}},
             "children":[{"path":"/config/datastore/{name}","text":"{name}","leaf":1,"info":{
               "GET":{"method":"GET","unstable":false,"parameters":{"type":"object"},"returns":{"type":"object"}},
               "DELETE":{"method":"DELETE","unstable":false,"parameters":{"type":"object"},"returns":{"type":"null"}}}}]},
            {"path":"/admin/datastore/{store}/download","text":"download","leaf":1,"info":{
              "GET":{"method":"DOWNLOAD","unstable":false,"parameters":{"type":"object"},"returns":{"type":"null"}}}},
            {"path":"/admin/datastore/{store}/prune","text":"prune","leaf":1,"info":{
              "POST":{"method":"POST","unstable":true,"parameters":{"type":"object"},"returns":{"type":"null"}}}}
          ]},
          {"path":"/reader/_upgrade_","text":"_upgrade_","leaf":0,"info":{},"children":[
            {"path":"/reader/_upgrade_/chunk","text":"chunk","leaf":1,"info":{"GET":{"method":"DOWNLOAD","unstable":false,"parameters":{"type":"object"},"returns":{"type":"null"}}}}]}
        ]"#;
        let spec = parse("pbs-test.json", json).expect("a PBS schema loads");
        assert_eq!(spec.dialect, Dialect::Pbs);
        assert_eq!(spec.protocol_roots.len(), 1);
        assert_eq!(
            spec.streamed,
            [
                "GET /admin/datastore/{store}/download",
                "GET /reader/_upgrade_/chunk"
            ]
        );
        let names: Vec<String> = spec
            .operations()
            .iter()
            .map(|(n, m)| format!("{} {} {}", m.verb, n.path, m.name))
            .collect();
        assert_eq!(
            names,
            [
                "GET / list_root",
                "GET /config/datastore list_datastore",
                "POST /config/datastore create_datastore",
                "DELETE /config/datastore/{name} delete_datastore",
                "GET /config/datastore/{name} read_datastore",
                "POST /admin/datastore/{store}/prune prune",
            ]
        );
        let (_, post) = spec.operations()[2];
        let props = post.parameters.properties.as_ref().expect("properties");
        assert_eq!(props["name"].pattern.as_deref(), Some("^[a-z]+$"));
        let Some(Format::Inline(keys)) = &props["tuning"].format else {
            panic!("an object format is a property string's keys");
        };
        assert!(keys["mode"].default_key && !keys["level"].default_key);
        assert!(
            matches!(&props["vanished"].format, Some(Format::List(i)) if i.enum_values.is_some())
        );
        let check = post.permissions.as_ref().and_then(|p| p.check.as_ref());
        assert!(check.is_some_and(|c| c.get("or").is_some()), "{check:?}");
        assert!(spec.operations()[5].1.unstable);
        // The same keys in a PVE schema (no root `/`) are still refused.
        let pve = br#"[{"path":"/a","text":"a","leaf":1,"expanded":true,"info":{"GET":{"method":"GET","unstable":false,
          "parameters":{"type":"object"},"returns":{"type":"null"}}}}]"#;
        let err = parse("pve-test.json", pve).expect_err("not PVE's keys");
        let text: Vec<String> = err.items.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "GET /a: method has no handler name (key \"name\")",
                "GET /a: unknown method key \"unstable\"",
                "path /a: unknown tree node key \"expanded\"",
            ]
        );
    }

    #[test]
    fn malformed_json_names_line_and_column() {
        let err = parse("t.json", b"[{\"path\": }]").expect_err("malformed");
        assert_eq!(err.items.len(), 1);
        assert!(
            err.items[0].location.starts_with("t.json:1:"),
            "{}",
            err.items[0]
        );
    }
}
