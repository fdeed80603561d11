//! `stats`: what the generated SDK covers.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ir::{Api, Field, Ty, TypeKind};
use crate::patch::Patches;

/// Coverage figures of one generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Schema file.
    pub spec: String,
    /// Schema sha256.
    pub sha256: String,
    /// Operations generated.
    pub operations: usize,
    /// Methods of the schema that are not operations, with why.
    pub not_generated: Vec<(String, String)>,
    /// Operations by HTTP verb.
    pub by_verb: BTreeMap<String, usize>,
    /// Fields (parameters, response fields, property-string keys) with a type.
    pub typed_fields: usize,
    /// Fields that are, or contain, `serde_json::Value`.
    pub value_fields: usize,
    /// Every `Value` fallback with its schema location and why.
    pub fallbacks: Vec<(String, String)>,
    /// Property-string structs (module path, name).
    pub property_strings: Vec<String>,
    /// Tagged unions.
    pub unions: Vec<String>,
    /// Open enums.
    pub enums: usize,
    /// Indexed parameters (prefix, max).
    pub indexed: Vec<(String, u32)>,
    /// Operations whose answer is a task id.
    pub task_operations: Vec<String>,
    /// Typed error variants added by patches.
    pub patched_error_variants: usize,
    /// (variant, operation) assignments of those variants.
    pub patched_error_assignments: usize,
    /// Predicates on every operation's error, added by patches.
    pub predicates: Vec<String>,
    /// Formats checked client-side, from patches.
    pub checked_formats: Vec<String>,
    /// Secret entries of the patches that type no field of this schema.
    pub unused_secrets: Vec<String>,
    /// Answer fields the schema calls required that decode as optional (no patch asserts them).
    pub answer_fields_made_optional: usize,
    /// Answer fields kept required by `response-fields` patches.
    pub answer_fields_required: usize,
    /// Answer fields given another type by `response-fields` patches.
    pub answer_fields_retyped: usize,
    /// Patch targets skipped because they apply from a later PVE version.
    pub skipped_patch_targets: usize,
    /// Patch files applied.
    pub patch_files: Vec<String>,
}

fn has_value(t: &Ty) -> bool {
    match t {
        Ty::Value | Ty::JsonObject => true,
        Ty::Vec(i) | Ty::Map(i) | Ty::Option(i) => has_value(i),
        Ty::Indexed { item, .. } => has_value(item),
        _ => false,
    }
}

/// Computes the figures.
pub fn stats(api: &Api, patches: &Patches) -> Stats {
    let mut s = Stats {
        spec: api.spec_file.clone(),
        sha256: api.sha256.clone(),
        operations: 0,
        not_generated: api.not_generated.clone(),
        by_verb: BTreeMap::new(),
        typed_fields: 0,
        value_fields: 0,
        fallbacks: api
            .fallbacks
            .iter()
            .map(|f| (f.location.clone(), f.reason.clone()))
            .collect(),
        property_strings: Vec::new(),
        unions: Vec::new(),
        enums: 0,
        indexed: api
            .index_specs
            .values()
            .map(|i| (i.prefix.clone(), i.max))
            .collect(),
        task_operations: patches.tasks.iter().cloned().collect(),
        patched_error_variants: api.errors.len(),
        patched_error_assignments: api.errors.iter().map(|e| e.operations.len()).sum(),
        predicates: api.predicates.iter().map(|p| p.name.clone()).collect(),
        checked_formats: api.formats.iter().map(|f| f.name.clone()).collect(),
        unused_secrets: api.unused_secrets.clone(),
        answer_fields_made_optional: api.answer_fields.made_optional,
        answer_fields_required: api.answer_fields.kept_required,
        answer_fields_retyped: api.answer_fields.retyped,
        skipped_patch_targets: patches.skipped.len(),
        patch_files: patches.files.clone(),
    };
    let count = |fields: &[Field], s: &mut Stats| {
        for f in fields {
            if has_value(&f.ty) {
                s.value_fields += 1;
            } else {
                s.typed_fields += 1;
            }
        }
    };
    for (path, module) in &api.modules {
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{}::", path.join("::"))
        };
        for op in &module.ops {
            s.operations += 1;
            *s.by_verb.entry(op.verb.clone()).or_default() += 1;
            count(&op.fields, &mut s);
        }
        for t in &module.types {
            match &t.kind {
                TypeKind::Struct { fields } => count(fields, &mut s),
                TypeKind::Tagged { variants, .. } => {
                    s.unions.push(format!("{prefix}{}", t.name));
                    for (_, _, fields) in variants {
                        count(fields, &mut s);
                    }
                }
                TypeKind::PropString(p) => {
                    s.property_strings.push(format!("{prefix}{}", t.name));
                    s.typed_fields += p.fields.len();
                }
                TypeKind::Enum { .. } => s.enums += 1,
            }
        }
    }
    s
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "schema: {} (sha256 {})", self.spec, self.sha256)?;
        let verbs: Vec<String> = self
            .by_verb
            .iter()
            .map(|(v, n)| format!("{v} {n}"))
            .collect();
        writeln!(
            f,
            "operations generated: {} ({})",
            self.operations,
            verbs.join(", ")
        )?;
        if !self.not_generated.is_empty() {
            writeln!(f, "methods not generated: {}", self.not_generated.len())?;
            for (op, why) in &self.not_generated {
                writeln!(f, "  {op}: {why}")?;
            }
        }
        writeln!(
            f,
            "fields: {} typed, {} serde_json::Value fallbacks",
            self.typed_fields, self.value_fields
        )?;
        writeln!(
            f,
            "property-string structs: {}",
            self.property_strings.len()
        )?;
        for p in &self.property_strings {
            writeln!(f, "  {p}")?;
        }
        writeln!(f, "tagged unions: {}", self.unions.len())?;
        for u in &self.unions {
            writeln!(f, "  {u}")?;
        }
        writeln!(f, "open enums: {}", self.enums)?;
        writeln!(f, "indexed parameters: {}", self.indexed.len())?;
        for (p, m) in &self.indexed {
            writeln!(f, "  {p}[n]: {p}0..{p}{m}")?;
        }
        writeln!(
            f,
            "operations returning a task: {}",
            self.task_operations.len()
        )?;
        for t in &self.task_operations {
            writeln!(f, "  {t}")?;
        }
        writeln!(
            f,
            "patched error variants: {} (on {} operation assignments)",
            self.patched_error_variants, self.patched_error_assignments
        )?;
        writeln!(f, "error predicates: {}", self.predicates.join(", "))?;
        writeln!(
            f,
            "formats checked client-side: {}",
            self.checked_formats.join(", ")
        )?;
        writeln!(
            f,
            "answer fields: {} the schema calls required decode as optional; {} kept required and {} retyped by response-fields patches",
            self.answer_fields_made_optional, self.answer_fields_required, self.answer_fields_retyped
        )?;
        if self.skipped_patch_targets > 0 {
            writeln!(
                f,
                "patch targets skipped (they apply from a later PVE version): {}",
                self.skipped_patch_targets
            )?;
        }
        if !self.unused_secrets.is_empty() {
            writeln!(
                f,
                "secret entries that type no field here: {}",
                self.unused_secrets.join(", ")
            )?;
        }
        writeln!(
            f,
            "Value fallbacks (schema location: why): {}",
            self.fallbacks.len()
        )?;
        for (loc, why) in &self.fallbacks {
            writeln!(f, "  {loc}: {why}")?;
        }
        Ok(())
    }
}
