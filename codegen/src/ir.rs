//! The named IR between `lower` and `emit`: modules, operations and types with their Rust names
//! decided, and the facts that docs are made of.

use std::collections::{BTreeMap, BTreeSet};

/// A Rust module path below `generated` (`["nodes", "node", "network", "iface"]`).
pub type ModPath = Vec<String>;

/// The whole API, ready to emit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Api {
    /// Schema file name, e.g. `pve-9.2.json`.
    pub spec_file: String,
    /// SHA-256 of the schema file.
    pub sha256: String,
    /// The PVE version of the schema (`0.0` for a PBS schema whose release is not pinned).
    pub version: String,
    /// Whose schema it is.
    pub dialect: crate::raw::Dialect,
    /// Methods of the schema that are not operations (PBS: the backup and reader protocols,
    /// streamed answers), as `METHOD /path` with why.
    pub not_generated: Vec<(String, String)>,
    /// Modules by path; the root module is the empty path.
    pub modules: BTreeMap<ModPath, Module>,
    /// Index specs (`generated::index::Net`) by type name.
    pub index_specs: BTreeMap<String, IndexSpecDef>,
    /// Every place where the schema gives no type, with why.
    pub fallbacks: Vec<Fallback>,
    /// Patch files applied.
    pub patch_files: Vec<String>,
    /// Typed error variants (from error patches).
    pub errors: Vec<crate::patch::ErrorVariant>,
    /// The formats the SDK checks (from formats patches), by name.
    pub formats: Vec<crate::patch::FormatDef>,
    /// Predicates on every operation's error (from predicate patches), by name.
    pub predicates: Vec<crate::patch::Predicate>,
    /// Secret entries of `patches/` that type no field of this schema (`field` or
    /// `field of METHOD /path`).
    pub unused_secrets: Vec<String>,
    /// What became of the answers' fields.
    pub answer_fields: AnswerFieldStats,
}

/// Answer fields (of every struct in every operation's answer) by what decides their optionality.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnswerFieldStats {
    /// Required by the schema, optional here (no patch says PVE always sends them).
    pub made_optional: usize,
    /// Required because a `response-fields` patch says so.
    pub kept_required: usize,
    /// Given another type by a `response-fields` patch.
    pub retyped: usize,
}

/// An indexed parameter's wire prefix and highest index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpecDef {
    /// `net` for `net[n]`.
    pub prefix: String,
    /// Highest index, inclusive.
    pub max: u32,
    /// The patch file that gives the bound.
    pub source: String,
}

/// A `serde_json::Value` in the output, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fallback {
    /// Schema location.
    pub location: String,
    /// Why no type could be given.
    pub reason: String,
}

/// One generated module (one node of the API tree, or a place for shared types).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Module {
    /// The API path of the tree node this module mirrors, if any.
    pub url: Option<String>,
    /// Child module names.
    pub children: BTreeSet<String>,
    /// Operations on this path.
    pub ops: Vec<Op>,
    /// Types defined here (operation-owned and shared).
    pub types: Vec<TypeDef>,
}

/// One operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// `GET`, `POST`, `PUT`, `DELETE`.
    pub verb: String,
    /// Path template.
    pub path: String,
    /// Handler name.
    pub handler: String,
    /// Request type name, e.g. `UpdateNetwork`.
    pub type_name: String,
    /// `{Op}Response`.
    pub response_name: String,
    /// `{Op}Error`.
    pub error_name: String,
    /// Request fields: path parameters first, in template order, then the rest by wire name.
    pub fields: Vec<Field>,
    /// What `{Op}Response` stands for.
    pub response: Ty,
    /// Permission check expression (compact JSON).
    pub permission_check: Option<String>,
    /// `user` of the permissions (`all`).
    pub permission_user: Option<String>,
    /// Runs in the privileged daemon.
    pub protected: bool,
    /// Parameter that names the node the call is proxied to.
    pub proxyto: Option<String>,
    /// Whether API tokens may call it.
    pub allowtoken: bool,
    /// First PVE version that has it.
    pub since: (u16, u16),
    /// Whether the answer is a task id.
    pub returns_task: bool,
    /// Whether the request is a family's declaration (`patches/families.toml` names it as a
    /// create): it also decodes, so a declaration can be rebuilt from what state recorded.
    pub declarable: bool,
    /// Typed error variants of this operation, in patch order.
    pub error_variants: Vec<String>,
    /// Those of them that mean the object read does not exist.
    pub absent_variants: Vec<String>,
    /// Path parameters the runtime knows more of than the segment rule: routed as the rest of
    /// the path, or of a checked format. In template order.
    pub path_specs: Vec<PathSpec>,
    /// Upstream prose (only with `--docs upstream`).
    pub description: Option<String>,
}

impl Op {
    /// `METHOD /path`.
    pub fn key(&self) -> String {
        format!("{} {}", self.verb, self.path)
    }
}

/// What the runtime checks of one path parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    /// The parameter.
    pub name: String,
    /// PVE routes it as the rest of the path (`path-rest` patch).
    pub rest: bool,
    /// The checked format's name (`formats` patch), when PVE verifies one the SDK knows.
    pub format: Option<String>,
}

/// A struct field or request parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Wire name.
    pub wire: String,
    /// Rust name (escaped).
    pub rust: String,
    /// Type without the `Option`.
    pub ty: Ty,
    /// Whether the field is required (else `Option`, or an empty map).
    pub required: bool,
    /// `#[serde(flatten)]`: indexed parameters and tagged unions.
    pub flatten: bool,
    /// A path parameter.
    pub path_param: bool,
    /// Doc facts.
    pub facts: Vec<String>,
    /// Upstream prose (only with `--docs upstream`).
    pub description: Option<String>,
}

/// A field type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ty {
    /// `String`.
    String,
    /// `crate::Secret`.
    Secret,
    /// `i64`.
    Integer,
    /// `f64`.
    Number,
    /// `bool`.
    Boolean,
    /// `()`.
    Unit,
    /// `serde_json::Value` (the schema gives no type).
    Value,
    /// `crate::Upid`: a task id (from the tasks patch).
    Upid,
    /// `serde_json::Map<String, Value>` (an object without properties).
    JsonObject,
    /// `Vec<T>`.
    Vec(Box<Ty>),
    /// `Option<T>` (an answer that may be null).
    Option(Box<Ty>),
    /// `BTreeMap<String, T>`.
    Map(Box<Ty>),
    /// A generated type.
    Named(TypeRef),
    /// `crate::Indexed<T, crate::generated::index::Spec>`.
    Indexed {
        /// Item type.
        item: Box<Ty>,
        /// Index spec type name.
        spec: String,
    },
}

/// A generated type by module and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TypeRef {
    /// Its module.
    pub module: ModPath,
    /// Its name.
    pub name: String,
}

/// A generated type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDef {
    /// Rust name.
    pub name: String,
    /// What it is.
    pub kind: TypeKind,
    /// Doc facts.
    pub facts: Vec<String>,
    /// Schema location it comes from.
    pub location: String,
}

/// The kinds of generated types.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// A response object (or nested object).
    Struct {
        /// Fields by wire name.
        fields: Vec<Field>,
    },
    /// An open enum of strings.
    Enum {
        /// (Rust variant, wire value).
        variants: Vec<(String, String)>,
    },
    /// A property-string struct.
    PropString(PropString),
    /// A union selected by a sibling property (`type-property` / `instance-types` / `oneOf`).
    Tagged {
        /// The selecting property's wire name.
        tag: String,
        /// (wire value, Rust variant, variant-only fields).
        variants: Vec<(String, String, Vec<Field>)>,
    },
}

/// A property-string format.
#[derive(Debug, Clone, PartialEq)]
pub struct PropString {
    /// Keys in print order (sorted by wire name).
    pub fields: Vec<PropField>,
    /// The key that may be written bare.
    pub default_key: Option<String>,
    /// (key, alias, keyAlias).
    pub aliases: Vec<(String, String, Option<String>)>,
    /// The field that keeps unknown keys.
    pub other_keys: String,
    /// Where it is used (`METHOD /path param "x"`).
    pub used_by: Vec<String>,
}

/// A property-string key.
#[derive(Debug, Clone, PartialEq)]
pub struct PropField {
    /// Wire key.
    pub key: String,
    /// Rust name.
    pub rust: String,
    /// Type: String, Integer, Number, Boolean or a Named enum.
    pub ty: Ty,
    /// Required.
    pub required: bool,
    /// Doc facts.
    pub facts: Vec<String>,
}

impl Api {
    /// The SDK module the generated code lives in: `generated` (PVE) or `pbs`.
    pub fn root(&self) -> &'static str {
        match self.dialect {
            crate::raw::Dialect::Pve => "generated",
            crate::raw::Dialect::Pbs => "pbs",
        }
    }

    /// The product's name in docs: `PVE` or `PBS`.
    pub fn product(&self) -> &'static str {
        self.dialect.product()
    }
}
