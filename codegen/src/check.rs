//! Stage `check`: invariants of the IR that emit relies on.

use std::collections::BTreeSet;

use crate::diag::Diagnostics;
use crate::ir::{Api, Ty};

/// Checks the lowered API.
///
/// # Errors
///
/// Every violated invariant, with its location.
pub fn check(api: &Api) -> Result<(), Diagnostics> {
    let mut d = Diagnostics::new("check");
    if let Some(root) = api.modules.get(&Vec::new()) {
        for (name, what) in [
            ("index", "index specs"),
            ("errors", "typed errors"),
            ("formats", "the format table"),
            ("samples", "the answer samples of the decode test"),
        ] {
            if root.children.contains(name) {
                d.push(
                    format!("path /{name}"),
                    format!("module name `{name}` is reserved for {what}"),
                );
            }
        }
    }
    // Setters: `new` is the constructor; two fields must not get one setter name.
    let setters =
        |fields: &mut dyn Iterator<Item = (&str, bool)>, loc: &str, d: &mut Diagnostics| {
            let mut seen = BTreeSet::new();
            for (rust, has_setter) in fields {
                if rust == "new" {
                    d.push(
                        loc,
                        "a field named `new` would collide with the constructor",
                    );
                }
                if has_setter && !seen.insert(crate::emit::setter_name(rust)) {
                    d.push(
                        loc,
                        format!(
                            "setter `{}` would be defined twice",
                            crate::emit::setter_name(rust)
                        ),
                    );
                }
            }
        };
    for module in api.modules.values() {
        for op in &module.ops {
            let mut it = op.fields.iter().map(|f| {
                (
                    f.rust.as_str(),
                    !f.required || matches!(f.ty, Ty::Indexed { .. }),
                )
            });
            setters(&mut it, &op.key(), &mut d);
        }
        for t in &module.types {
            match &t.kind {
                crate::ir::TypeKind::PropString(p) => {
                    let mut it = p.fields.iter().map(|f| (f.rust.as_str(), !f.required));
                    setters(&mut it, &t.location, &mut d);
                }
                crate::ir::TypeKind::Tagged { variants, .. } => {
                    for (_, _, fields) in variants {
                        let mut it = fields.iter().map(|f| (f.rust.as_str(), !f.required));
                        setters(&mut it, &t.location, &mut d);
                    }
                }
                crate::ir::TypeKind::Struct { fields } => {
                    let mut it = fields.iter().map(|f| (f.rust.as_str(), false));
                    setters(&mut it, &t.location, &mut d);
                }
                crate::ir::TypeKind::Enum { .. } => {}
            }
        }
    }
    let mut ops = BTreeSet::new();
    for module in api.modules.values() {
        for op in &module.ops {
            let key = op.key();
            if !ops.insert(key.clone()) {
                d.push(&key, "operation defined twice");
            }
            let params = crate::lower::path_params(&op.path);
            for p in &params {
                match op.fields.iter().find(|f| &f.wire == p) {
                    Some(f) if f.required && f.path_param => {
                        if !matches!(f.ty, Ty::String | Ty::Integer | Ty::Named(_)) {
                            d.push(&key, format!("path parameter \"{p}\" has no scalar type"));
                        }
                    }
                    _ => d.push(
                        &key,
                        format!("path parameter \"{p}\" is not a required field"),
                    ),
                }
            }
            for f in &op.fields {
                if f.path_param && !params.contains(&f.wire) {
                    d.push(
                        &key,
                        format!("field \"{}\" is marked as a path parameter", f.wire),
                    );
                }
            }
        }
    }
    d.finish(())
}
