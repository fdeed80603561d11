//! Stage `patch`: our fixes and additions to the schema, from `patches/*.toml`.
//!
//! One small file per fix, each with a `reason` and its `evidence` (the upstream file that shows
//! the fact). Kinds:
//!
//! - `index-bounds`: the highest index of indexed parameters (`net[n]`: `net = 31`), which the
//!   schema only states in prose, if at all;
//! - `secrets`: fields whose values are secrets, typed `Secret` so they never print;
//! - `tasks`: operations whose successful answer is a task id (UPID);
//! - `error`: a typed error variant, its matcher and target operations;
//! - `formats`: named formats PVE verifies, with PVE's regex, checked client-side;
//! - `path-rest`: paths whose last parameter PVE routes as the rest of the path;
//! - `predicate`: a predicate on every operation's error (`is_not_implemented()`);
//! - `response-fields`: fields of an operation's answer that PVE always sends (kept required;
//!   every other answer field is optional), and answer fields whose type the schema gets wrong.
//!
//! A patch that names an operation the schema does not have fails generation, unless the patch
//! says it applies from a later PVE version than the schema's: `since = "9.2"` for the whole
//! file, or a target written `{ op = "METHOD /path", since = "9.2" }`. Such a target is skipped
//! with a note ([`Patches::skipped`]) for older schemas, whether or not they have the operation,
//! and must exist from that version on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::diag::Diagnostics;
use crate::raw::Spec;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PatchFile {
    kind: String,
    reason: String,
    evidence: Vec<String>,
    #[serde(default)]
    bounds: BTreeMap<String, u32>,
    #[serde(default)]
    fields: Vec<toml::Value>,
    #[serde(default)]
    operations: Vec<Target>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    absence: Vec<String>,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    doc: Option<String>,
    #[serde(default)]
    display: Option<String>,
    #[serde(default, rename = "match")]
    matcher: Option<MatchSpec>,
    #[serde(default)]
    formats: Vec<toml::Value>,
    #[serde(default)]
    families: Vec<toml::Value>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    renames: BTreeMap<String, String>,
}

/// An operation a patch targets: `"METHOD /path"`, or `{ op = "METHOD /path", since = "9.2" }`
/// when the patch applies to it from a PVE version later than the file's.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Target {
    Plain(String),
    Versioned(VersionedTarget),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VersionedTarget {
    op: String,
    since: String,
}

/// Reads `9.2` as `(9, 2)`.
fn parse_since(text: &str) -> Option<(u16, u16)> {
    let (a, b) = text.split_once('.')?;
    let ok = |t: &str| !t.is_empty() && t.len() <= 3 && t.bytes().all(|c| c.is_ascii_digit());
    if !ok(a) || !ok(b) {
        return None;
    }
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// What the patch stage knows while reading one file: the schema's operations and version, and
/// the file's own `since`.
struct Scope<'a> {
    file: &'a str,
    spec: &'a Spec,
    ops: &'a BTreeSet<String>,
    version: (u16, u16),
    /// The file's `since`, parsed; `None` when absent (or unreadable, already reported).
    since: Option<(u16, u16)>,
}

impl Scope<'_> {
    /// Whether a target with `since` applies to this schema: `false` (with a note) when the
    /// schema is older; a `since` that is not `X.Y` is an error.
    fn applies(
        &self,
        what: &str,
        since: Option<&str>,
        out: &mut Patches,
        diags: &mut Diagnostics,
    ) -> bool {
        let since = match since {
            Some(text) => match parse_since(text) {
                Some(v) => Some(v),
                None => {
                    diags.push(
                        self.file,
                        format!("since {text:?} of {what} is not a PVE version like 9.2"),
                    );
                    return false;
                }
            },
            None => self.since,
        };
        match since {
            Some(v) if v > self.version => {
                out.skipped.push(format!(
                    "{}: {what} skipped: the patch applies since PVE {}.{}, the schema is PVE {}.{}",
                    self.file, v.0, v.1, self.version.0, self.version.1
                ));
                false
            }
            _ => true,
        }
    }

    /// The operation of a target if the patch applies to it here; a missing one is an error.
    fn target(&self, t: &Target, out: &mut Patches, diags: &mut Diagnostics) -> Option<String> {
        let (op, since) = match t {
            Target::Plain(op) => (op, None),
            Target::Versioned(v) => (&v.op, Some(v.since.as_str())),
        };
        if !self.applies(&format!("target \"{op}\""), since, out, diags) {
            return None;
        }
        Some(op.clone())
    }

    fn check_op(&self, op: &str, diags: &mut Diagnostics) -> bool {
        if self.ops.contains(op) {
            return true;
        }
        diags.push(
            self.file,
            format!(
                "target operation \"{op}\" does not exist in {}",
                self.spec.file_name
            ),
        );
        false
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FormatEntry {
    name: String,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    keys: Option<toml::Table>,
    #[serde(default)]
    min_length: Option<usize>,
    #[serde(default)]
    max_length: Option<usize>,
    evidence: String,
}

/// The facts a key of a property-string format may state, in the schema's names (those the
/// SDK's parameter check reads).
const KEY_FACTS: &[&str] = &[
    "type",
    "format",
    "optional",
    "requires",
    "default_key",
    "alias",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
];

/// A family's object, from `kind = "families"` patches: its four operations (`METHOD /path`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyOps {
    /// The family's kind, as `pve-resources` names it in state (`pool`).
    pub kind: String,
    /// The create: its request is the declaration.
    pub create: String,
    /// The read that answers one object.
    pub read: String,
    /// The update.
    pub update: String,
    /// The delete.
    pub delete: String,
    /// The first PVE release that has the family (`9.0` for HA rules): generating for an
    /// older schema skips it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// The families of a `kind = "families"` patch file, for `pve-codegen diff --families` (which
/// reads no schema's patches: the operations are checked against each schema by the diff).
///
/// # Errors
///
/// The file cannot be read, is not such a patch, or an entry is malformed.
pub fn read_families(path: &Path) -> Result<Vec<FamilyOps>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: PatchFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if file.kind != "families" {
        return Err(format!(
            "{}: kind is \"{}\", not \"families\"",
            path.display(),
            file.kind
        ));
    }
    file.families
        .into_iter()
        .map(|v| {
            v.try_into()
                .map_err(|e| format!("{}: bad entry: {e}", path.display()))
        })
        .collect()
}

/// A named format PVE verifies, from `kind = "formats"` patches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatDef {
    /// The format's name in the schema (`pve-node`).
    pub name: String,
    /// The anchored regex PVE checks it with (empty for a property-string format).
    pub pattern: String,
    /// A property-string format's keys and their facts, as JSON in the schema's key names
    /// (`{"ip":{"format":"pve-ipv4-config","optional":1},...}`): a format PVE registers as a
    /// hash, which the schema only names.
    pub keys: Option<String>,
    /// Length bounds PVE checks besides the regex.
    pub min_length: Option<usize>,
    /// Length bounds PVE checks besides the regex.
    pub max_length: Option<usize>,
    /// The upstream function that verifies it.
    pub evidence: String,
    /// The patch file.
    pub file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchSpec {
    status: u16,
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// How a PVE error answer is recognised: its status and either one `errors` field whose text
/// matches `pattern`, or a message matching `pattern` (anchored regexes; named groups are
/// captured).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ErrorMatcher {
    /// HTTP status.
    pub status: u16,
    /// The `errors` field, or `None` to match the message.
    pub field: Option<String>,
    /// The anchored regex.
    pub pattern: String,
}

/// A predicate on every operation's error (`is_not_implemented()`), from `kind = "predicate"`
/// patches: for answers any operation can get, where a variant in every enum would cost compile
/// time and tell nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// The method, e.g. `is_not_implemented`.
    pub name: String,
    /// One doc line.
    pub doc: String,
    /// Recognisers (several patches may add to one predicate).
    pub matchers: Vec<ErrorMatcher>,
    /// The patch files.
    pub files: Vec<String>,
}

/// A typed error variant from `kind = "error"` patches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorVariant {
    /// Variant (and struct) name, e.g. `NetworkInterfaceNotFound`.
    pub name: String,
    /// One doc line.
    pub doc: String,
    /// Display text with `{field}` placeholders.
    pub display: String,
    /// Fields, each from a named regex group or a path parameter.
    pub fields: Vec<String>,
    /// Recognisers (several patches may add to one variant).
    pub matchers: Vec<ErrorMatcher>,
    /// Target operations (`METHOD /path`).
    pub operations: BTreeSet<String>,
    /// The GET operations among them for which this variant means "the object does not
    /// exist" (`client.get_opt` answers `None`).
    pub absence: BTreeSet<String>,
    /// The patch files.
    pub files: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseFieldEntry {
    operation: String,
    field: String,
    #[serde(default)]
    required: bool,
    #[serde(default, rename = "type")]
    schema: Option<toml::Value>,
    evidence: String,
    #[serde(default)]
    since: Option<String>,
}

/// One answer field a `response-fields` patch speaks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseField {
    /// PVE always sends it: absent or null is a decode error naming the field.
    pub required: bool,
    /// The type PVE really sends, in place of the schema's.
    pub schema: Option<crate::raw::Schema>,
    /// The upstream code that shows it.
    pub evidence: String,
    /// The patch file.
    pub file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretField {
    name: String,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

/// All patches, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patches {
    /// Highest index by indexed-parameter base name (`net` -> 31), with the file that says so.
    pub index_bounds: BTreeMap<String, (u32, String)>,
    /// Secret wire names that apply everywhere.
    pub secret_fields: BTreeSet<String>,
    /// Secret wire names for one operation (`POST /access/...`).
    pub secret_scoped: BTreeSet<(String, String)>,
    /// Operations (`METHOD /path`) that answer with a task id.
    pub tasks: BTreeSet<String>,
    /// Typed error variants by name.
    pub errors: BTreeMap<String, ErrorVariant>,
    /// Formats the SDK checks, by name.
    pub formats: BTreeMap<String, FormatDef>,
    /// Predicates on every operation's error, by method name.
    pub predicates: BTreeMap<String, Predicate>,
    /// Path templates whose last parameter PVE routes as the rest of the path, with the file.
    pub path_rest: BTreeMap<String, String>,
    /// The patch files read, sorted.
    pub files: Vec<String>,
    /// Notes on targets skipped because their patch applies only from a later PVE version.
    pub skipped: Vec<String>,
    /// The families of `pve-resources` that come from the schema, by kind: their four
    /// operations (`patches/families.toml`).
    pub families: BTreeMap<String, FamilyOps>,
    /// Answer fields by operation (`METHOD /path`) and field path (`[].vmid`, `members[].ip`,
    /// `{}.state`: `[]` an array's items, `{}` a map's values).
    pub response_fields: BTreeMap<String, BTreeMap<String, ResponseField>>,
    /// Request type names chosen over the handler's (`GET /nodes/{node}/qemu` -> `ListVms`),
    /// by operation, with the file.
    pub renames: BTreeMap<String, (String, String)>,
}

/// Whether `path` is a field path: names joined by `.`, each optionally followed by `[]` or `{}`
/// (and a path may start with them, for an answer that is an array or a map).
pub fn valid_field_path(path: &str) -> bool {
    let mut rest = path;
    while let Some(r) = rest.strip_prefix("[]").or_else(|| rest.strip_prefix("{}")) {
        rest = r;
    }
    if rest.is_empty() {
        return false;
    }
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    rest.split('.').all(|part| {
        let mut name = part;
        while let Some(n) = name.strip_suffix("[]").or_else(|| name.strip_suffix("{}")) {
            name = n;
        }
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }) && !path.ends_with("[]")
        && !path.ends_with("{}")
}

impl Patches {
    /// Whether `field` of `op` (`METHOD /path`) is a secret.
    pub fn is_secret(&self, op: &str, field: &str) -> bool {
        self.secret_fields.contains(field)
            || self
                .secret_scoped
                .contains(&(op.to_owned(), field.to_owned()))
    }
}

/// Parses patch files given as (name, text), checking them against `spec`, the schema of PVE
/// `version`.
///
/// # Errors
///
/// Every problem: unreadable TOML, unknown kinds or keys, missing reason or evidence, targets
/// that the schema does not have (and should, by their `since`), and conflicting patches.
pub fn parse(
    files: &[(String, String)],
    spec: &Spec,
    version: (u16, u16),
) -> Result<Patches, Diagnostics> {
    let mut diags = Diagnostics::new("patch");
    let ops: BTreeSet<String> = spec
        .operations()
        .iter()
        .map(|(n, m)| format!("{} {}", m.verb, n.path))
        .collect();
    let mut out = Patches::default();
    for (name, text) in files {
        out.files.push(name.clone());
        let file: PatchFile = match toml::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                diags.push(name, format!("not a valid patch: {}", e.message()));
                continue;
            }
        };
        if file.reason.trim().is_empty() {
            diags.push(name, "a patch needs a reason");
        }
        if file.evidence.is_empty() {
            diags.push(
                name,
                "a patch needs evidence (the upstream file that shows it)",
            );
        }
        let file_since = match file.since.as_deref() {
            None => None,
            Some(text) => {
                let v = parse_since(text);
                if v.is_none() {
                    diags.push(
                        name,
                        format!("since {text:?} is not a PVE version like 9.2"),
                    );
                }
                v
            }
        };
        let scope = Scope {
            file: name,
            spec,
            ops: &ops,
            version,
            since: file_since,
        };
        if file_since.is_some_and(|v| v > version) {
            out.skipped.push(format!(
                "{name}: skipped: the patch applies since PVE {}, the schema is PVE {}.{}",
                file.since.as_deref().unwrap_or_default(),
                version.0,
                version.1
            ));
            continue;
        }
        match file.kind.as_str() {
            "index-bounds" => {
                if file.bounds.is_empty() {
                    diags.push(name, "an index-bounds patch needs [bounds]");
                }
                for (base, max) in file.bounds {
                    if let Some((old, other)) = out.index_bounds.get(&base) {
                        if *old != max {
                            diags.push(
                                name,
                                format!("bound of {base}[n] is {max} here but {old} in {other}"),
                            );
                        }
                    }
                    out.index_bounds.insert(base, (max, name.clone()));
                }
            }
            "secrets" => {
                if file.fields.is_empty() {
                    diags.push(name, "a secrets patch needs [[fields]]");
                }
                for f in file.fields {
                    let f: SecretField = match f.try_into() {
                        Ok(f) => f,
                        Err(e) => {
                            diags.push(name, format!("bad [[fields]] entry: {e}"));
                            continue;
                        }
                    };
                    match f.operation {
                        Some(op) => {
                            let what = format!("field \"{}\" of \"{op}\"", f.name);
                            if scope.applies(&what, f.since.as_deref(), &mut out, &mut diags)
                                && scope.check_op(&op, &mut diags)
                            {
                                out.secret_scoped.insert((op, f.name));
                            }
                        }
                        None => {
                            if f.since.is_some() {
                                diags.push(
                                    name,
                                    format!("field \"{}\" has a since but no operation", f.name),
                                );
                            }
                            out.secret_fields.insert(f.name);
                        }
                    }
                }
            }
            "tasks" => {
                if file.operations.is_empty() {
                    diags.push(name, "a tasks patch needs operations");
                }
                for t in &file.operations {
                    let Some(op) = scope.target(t, &mut out, &mut diags) else {
                        continue;
                    };
                    scope.check_op(&op, &mut diags);
                    if !out.tasks.insert(op.clone()) {
                        diags.push(name, format!("operation \"{op}\" is listed twice"));
                    }
                }
            }
            "families" => {
                if file.families.is_empty() {
                    diags.push(name, "a families patch needs [[families]]");
                }
                for f in file.families {
                    let f: FamilyOps = match f.try_into() {
                        Ok(f) => f,
                        Err(e) => {
                            diags.push(name, format!("bad [[families]] entry: {e}"));
                            continue;
                        }
                    };
                    let what = format!("family \"{}\"", f.kind);
                    if !scope.applies(&what, f.since.as_deref(), &mut out, &mut diags) {
                        continue;
                    }
                    for op in [&f.create, &f.read, &f.update, &f.delete] {
                        scope.check_op(op, &mut diags);
                    }
                    if !f.create.starts_with("POST ") {
                        diags.push(
                            name,
                            format!("family \"{}\": the create is not a POST", f.kind),
                        );
                    }
                    if let Some(old) = out.families.insert(f.kind.clone(), f) {
                        diags.push(name, format!("family \"{}\" is listed twice", old.kind));
                    }
                }
            }
            "error" => error_patch(&scope, file, &mut out, &mut diags),
            "response-fields" => response_fields_patch(&scope, file, &mut out, &mut diags),
            "formats" => formats_patch(name, file, &mut out, &mut diags),
            "predicate" => predicate_patch(name, file, &mut out, &mut diags),
            "path-rest" => {
                if file.paths.is_empty() {
                    diags.push(name, "a path-rest patch needs paths");
                }
                let paths: BTreeSet<&str> = ops
                    .iter()
                    .filter_map(|o| o.split_once(' ').map(|(_, p)| p))
                    .collect();
                for path in file.paths {
                    if !paths.contains(path.as_str()) {
                        diags.push(
                            name,
                            format!("path \"{path}\" does not exist in {}", spec.file_name),
                        );
                    } else if !path.ends_with('}') {
                        diags.push(
                            name,
                            format!("path \"{path}\" does not end in a parameter, so nothing in it is the rest of the path"),
                        );
                    }
                    if let Some(other) = out.path_rest.insert(path.clone(), name.clone()) {
                        diags.push(name, format!("path \"{path}\" is listed in {other} too"));
                    }
                }
            }
            "names" => {
                if file.renames.is_empty() {
                    diags.push(name, "a names patch needs [renames]");
                }
                for (op, new) in file.renames {
                    scope.check_op(&op, &mut diags);
                    let pascal = new.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                        && new.chars().all(|c| c.is_ascii_alphanumeric());
                    if !pascal {
                        diags.push(
                            name,
                            format!("rename of \"{op}\": \"{new}\" is not a PascalCase name"),
                        );
                        continue;
                    }
                    if let Some((_, other)) = out.renames.get(&op) {
                        diags.push(
                            name,
                            format!("operation \"{op}\" is renamed in {other} too"),
                        );
                    }
                    out.renames.insert(op, (new, name.clone()));
                }
            }
            other => diags.push(name, format!("unknown patch kind \"{other}\"")),
        }
    }
    out.files.sort();
    diags.finish(out)
}

fn response_fields_patch(
    scope: &Scope<'_>,
    file: PatchFile,
    out: &mut Patches,
    diags: &mut Diagnostics,
) {
    let name = scope.file;
    if file.fields.is_empty() {
        diags.push(name, "a response-fields patch needs [[fields]]");
    }
    for f in file.fields {
        let f: ResponseFieldEntry = match f.try_into() {
            Ok(f) => f,
            Err(e) => {
                diags.push(name, format!("bad [[fields]] entry: {e}"));
                continue;
            }
        };
        let loc = format!("{name} field \"{}\" of \"{}\"", f.field, f.operation);
        if !valid_field_path(&f.field) {
            diags.push(
                &loc,
                "not a field path (names joined by `.`; `[]` for an array's items, `{}` for a map's values)",
            );
            continue;
        }
        if f.evidence.trim().is_empty() {
            diags.push(
                &loc,
                "a field needs evidence (the upstream code that sends it)",
            );
        }
        if !f.required && f.schema.is_none() {
            diags.push(&loc, "a field entry needs required = true, a type, or both");
        }
        let what = format!("field \"{}\" of \"{}\"", f.field, f.operation);
        if !scope.applies(&what, f.since.as_deref(), out, diags)
            || !scope.check_op(&f.operation, diags)
        {
            continue;
        }
        let schema = match f.schema {
            None => None,
            Some(t) => {
                let json = match serde_json::to_value(&t) {
                    Ok(j) => j,
                    Err(e) => {
                        diags.push(&loc, format!("type: {e}"));
                        continue;
                    }
                };
                match crate::raw::parse_schema(&format!("{loc} type"), &json) {
                    Ok(s) => Some(s),
                    Err(d) => {
                        for d in d.items {
                            diags.push(d.location, d.message);
                        }
                        continue;
                    }
                }
            }
        };
        let entry = ResponseField {
            required: f.required,
            schema,
            evidence: f.evidence,
            file: name.to_owned(),
        };
        let fields = out.response_fields.entry(f.operation).or_default();
        if let Some(other) = fields.get(&f.field) {
            diags.push(&loc, format!("the field is patched in {} too", other.file));
            continue;
        }
        fields.insert(f.field, entry);
    }
}

/// The `[match]` of a patch as a matcher, checked (anchored, compiling); with its group names.
fn matcher_of(
    name: &str,
    m: MatchSpec,
    diags: &mut Diagnostics,
) -> Option<(ErrorMatcher, Vec<String>)> {
    let (field, pattern) = match (m.field, m.value, m.message) {
        (Some(f), Some(v), None) => (Some(f), v),
        (None, None, Some(msg)) => (None, msg),
        _ => {
            diags.push(name, "[match] needs either field + value or message");
            return None;
        }
    };
    if !pattern.starts_with('^') || !pattern.ends_with('$') {
        diags.push(
            name,
            format!("pattern {pattern:?} must be anchored with ^ and $ (exact match)"),
        );
    }
    let groups: Vec<String> = match regex::Regex::new(&pattern) {
        Ok(re) => re.capture_names().flatten().map(str::to_owned).collect(),
        Err(e) => {
            diags.push(name, format!("pattern {pattern:?} does not compile: {e}"));
            return None;
        }
    };
    Some((
        ErrorMatcher {
            status: m.status,
            field,
            pattern,
        },
        groups,
    ))
}

fn predicate_patch(name: &str, file: PatchFile, out: &mut Patches, diags: &mut Diagnostics) {
    let (Some(method), Some(doc), Some(m)) = (file.name, file.doc, file.matcher) else {
        diags.push(name, "a predicate patch needs name, doc and [match]");
        return;
    };
    if file.variant.is_some() || file.display.is_some() || !file.operations.is_empty() {
        diags.push(
            name,
            "a predicate applies to every operation's error: it has no variant, display or operations",
        );
    }
    let valid = method
        .strip_prefix("is_")
        .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
    if !valid {
        diags.push(
            name,
            format!("predicate name \"{method}\" must be is_<snake_case>"),
        );
    }
    if ["is_permission_denied", "is_authentication_failure"].contains(&method.as_str()) {
        diags.push(
            name,
            format!("predicate name \"{method}\" is the runtime's own"),
        );
    }
    let Some((matcher, _)) = matcher_of(name, m, diags) else {
        return;
    };
    for (other, p) in &out.predicates {
        if other != &method && p.matchers.contains(&matcher) {
            diags.push(
                name,
                format!(
                    "collides with predicate {other} ({}): the same answer",
                    p.files.join(", ")
                ),
            );
        }
    }
    let entry = out
        .predicates
        .entry(method.clone())
        .or_insert_with(|| Predicate {
            name: method,
            doc: doc.clone(),
            matchers: Vec::new(),
            files: Vec::new(),
        });
    if entry.doc != doc {
        diags.push(
            name,
            format!(
                "collides with {}: predicate {} is documented differently there",
                entry.files.join(", "),
                entry.name
            ),
        );
    }
    entry.matchers.push(matcher);
    entry.files.push(name.to_owned());
}

fn formats_patch(name: &str, file: PatchFile, out: &mut Patches, diags: &mut Diagnostics) {
    if file.formats.is_empty() {
        diags.push(name, "a formats patch needs [[formats]]");
    }
    for f in file.formats {
        let f: FormatEntry = match f.try_into() {
            Ok(f) => f,
            Err(e) => {
                diags.push(name, format!("bad [[formats]] entry: {e}"));
                continue;
            }
        };
        let loc = format!("{name} format \"{}\"", f.name);
        let keys = match (&f.pattern, &f.keys) {
            (Some(pattern), None) => {
                if !pattern.starts_with('^') || !pattern.ends_with('$') {
                    diags.push(
                        &loc,
                        format!("pattern {pattern:?} must be anchored with ^ and $"),
                    );
                }
                if let Err(e) = regex::Regex::new(pattern) {
                    diags.push(&loc, format!("pattern {pattern:?} does not compile: {e}"));
                }
                None
            }
            (None, Some(keys)) => format_keys(&loc, keys, diags),
            _ => {
                diags.push(
                    &loc,
                    "a format has either a pattern or the keys of its property string",
                );
                None
            }
        };
        if f.evidence.trim().is_empty() {
            diags.push(&loc, "a format needs evidence (the upstream function)");
        }
        if let (Some(a), Some(b)) = (f.min_length, f.max_length) {
            if a > b {
                diags.push(&loc, format!("min-length {a} is above max-length {b}"));
            }
        }
        if let Some(other) = out.formats.get(&f.name) {
            diags.push(&loc, format!("format defined in {} too", other.file));
            continue;
        }
        out.formats.insert(
            f.name.clone(),
            FormatDef {
                name: f.name,
                pattern: f.pattern.unwrap_or_default(),
                keys,
                min_length: f.min_length,
                max_length: f.max_length,
                evidence: f.evidence,
                file: name.to_owned(),
            },
        );
    }
}

/// A property-string format's keys as JSON, each a table of [`KEY_FACTS`]; `None` (with the
/// problems pushed) when one is malformed.
fn format_keys(loc: &str, keys: &toml::Table, diags: &mut Diagnostics) -> Option<String> {
    if keys.is_empty() {
        diags.push(loc, "a property-string format needs at least one key");
        return None;
    }
    let mut bad = false;
    for (key, facts) in keys {
        let Some(facts) = facts.as_table() else {
            diags.push(loc, format!("key {key:?} must be a table of facts"));
            bad = true;
            continue;
        };
        for fact in facts.keys().filter(|f| !KEY_FACTS.contains(&f.as_str())) {
            diags.push(loc, format!("key {key:?}: unknown fact {fact:?}"));
            bad = true;
        }
        if let Some(r) = facts.get("requires").and_then(toml::Value::as_str) {
            if !keys.contains_key(r) {
                diags.push(
                    loc,
                    format!("key {key:?} requires {r:?}, which is not a key"),
                );
                bad = true;
            }
        }
    }
    if bad {
        return None;
    }
    let json = serde_json::to_value(keys).map_err(|e| e.to_string());
    match json.and_then(|v| serde_json::to_string(&v).map_err(|e| e.to_string())) {
        Ok(text) => Some(text),
        Err(e) => {
            diags.push(loc, format!("keys cannot be written as JSON: {e}"));
            None
        }
    }
}

/// Expands `METHOD /path`, `* /path` and `/prefix/**` patterns to the schema's operations.
fn expand(pattern: &str, ops: &BTreeSet<String>) -> Vec<String> {
    let Some((method, path)) = pattern.split_once(' ') else {
        return Vec::new();
    };
    ops.iter()
        .filter(|op| {
            let (m, p) = op.split_once(' ').unwrap_or_default();
            let method_ok = method == "*" || method == m;
            let path_ok = match path.strip_suffix("/**") {
                Some(prefix) => p == prefix || p.starts_with(&format!("{prefix}/")),
                None => p == path,
            };
            method_ok && path_ok
        })
        .cloned()
        .collect()
}

fn error_patch(scope: &Scope<'_>, file: PatchFile, out: &mut Patches, diags: &mut Diagnostics) {
    let name = scope.file;
    let (Some(variant), Some(doc), Some(display), Some(m)) =
        (file.variant, file.doc, file.display, file.matcher)
    else {
        diags.push(
            name,
            "an error patch needs variant, doc, display and [match]",
        );
        return;
    };
    if !variant
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase())
        || !variant.chars().all(|c| c.is_ascii_alphanumeric())
    {
        diags.push(
            name,
            format!("variant \"{variant}\" must be a CamelCase identifier"),
        );
    }
    if ["Api", "Client"].contains(&variant.as_str()) {
        diags.push(name, format!("variant name \"{variant}\" is reserved"));
    }
    let Some((matcher, groups)) = matcher_of(name, m, diags) else {
        return;
    };
    let fields: Vec<String> = file
        .fields
        .iter()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    if fields.len() != file.fields.len() {
        diags.push(name, "fields must be a list of names");
    }
    let mut targets = BTreeSet::new();
    for t in &file.operations {
        let Some(pat) = scope.target(t, out, diags) else {
            continue;
        };
        let found = expand(&pat, scope.ops);
        if found.is_empty() {
            scope.check_op(&pat, diags);
        }
        targets.extend(found);
    }
    let mut absence = BTreeSet::new();
    for op in &file.absence {
        if !op.starts_with("GET ") {
            diags.push(
                name,
                format!("absence \"{op}\" is not a GET: only a read can answer that its object is absent"),
            );
        } else if !targets.contains(op) {
            diags.push(
                name,
                format!("absence \"{op}\" is not one of this patch's target operations"),
            );
        } else {
            absence.insert(op.clone());
        }
    }
    for f in &fields {
        if groups.contains(f) {
            continue;
        }
        for op in &targets {
            let path = op.split_once(' ').map(|(_, p)| p).unwrap_or_default();
            if !crate::lower::path_params(path).contains(f) {
                diags.push(
                    name,
                    format!("field \"{f}\" is neither a group of the pattern nor a path parameter of {op}"),
                );
            }
        }
    }
    let mut rest = display.as_str();
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let placeholder = &after[..close];
        if !fields.iter().any(|f| f == placeholder) {
            diags.push(
                name,
                format!("display names {{{placeholder}}}, which is not a field"),
            );
        }
        rest = &after[close + 1..];
    }
    for (other_name, other) in &out.errors {
        if other_name != &variant && other.matchers.contains(&matcher) {
            let shared: Vec<&String> = other.operations.intersection(&targets).collect();
            if !shared.is_empty() {
                diags.push(
                    name,
                    format!(
                        "collides with {other_name} ({}): the same answer on {}",
                        other.files.join(", "),
                        shared[0]
                    ),
                );
            }
        }
    }
    match out.errors.get_mut(&variant) {
        Some(existing) => {
            if existing.fields != fields || existing.display != display {
                diags.push(
                    name,
                    format!(
                        "collides with {}: variant {variant} is defined there with other fields or display",
                        existing.files.join(", ")
                    ),
                );
                return;
            }
            existing.matchers.push(matcher);
            existing.operations.extend(targets);
            existing.absence.extend(absence);
            existing.files.push(name.to_owned());
        }
        None => {
            out.errors.insert(
                variant.clone(),
                ErrorVariant {
                    name: variant,
                    doc,
                    display,
                    fields,
                    matchers: vec![matcher],
                    operations: targets,
                    absence,
                    files: vec![name.to_owned()],
                },
            );
        }
    }
}

/// Reads every `*.toml` in `dir` (sorted by name) and parses them.
///
/// # Errors
///
/// An unreadable folder or file, or every problem [`parse`] finds.
pub fn load(dir: &Path, spec: &Spec, version: (u16, u16)) -> Result<Patches, Diagnostics> {
    let mut diags = Diagnostics::new("patch");
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut paths: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            paths.sort();
            for p in paths {
                let name = p
                    .file_name()
                    .map(|n| format!("patches/{}", n.to_string_lossy()))
                    .unwrap_or_default();
                match std::fs::read_to_string(&p) {
                    Ok(text) => files.push((name, text)),
                    Err(e) => diags.push(name, format!("cannot read: {e}")),
                }
            }
        }
        Err(e) => diags.push(
            dir.display().to_string(),
            format!("cannot read patches: {e}"),
        ),
    }
    diags.finish(())?;
    parse(&files, spec, version)
}
