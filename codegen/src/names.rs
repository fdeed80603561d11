//! Rust names from schema names: modules and fields in snake case, types and variants in
//! Pascal case, keywords (and, for types, prelude names such as `Copy`) escaped with a trailing
//! `_`; the wire name is kept by a serde rename.

use heck::{ToSnakeCase, ToUpperCamelCase};

const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names of the standard prelude that generated code relies on (types, traits, variants, derive
/// macros): a generated type of that name would shadow them in its module.
const PRELUDE: &[&str] = &[
    "Box",
    "Clone",
    "Copy",
    "Debug",
    "Default",
    "Drop",
    "Eq",
    "Err",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "Hash",
    "Into",
    "Iterator",
    "None",
    "Ok",
    "Option",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Result",
    "Send",
    "Sized",
    "Some",
    "String",
    "Sync",
    "ToString",
    "Unpin",
    "Vec",
];

/// Whether `s` is a Rust keyword (strict, reserved or edition-reserved).
pub fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

/// A snake-case identifier for a field or module: `bond-primary` -> `bond_primary`,
/// `type` -> `type_`, `8021q` -> `_8021q`.
pub fn snake(wire: &str) -> String {
    let mut s = wire
        .replace(['-', '.', ':', '/', '+', ' '], "_")
        .to_snake_case();
    if s.is_empty() {
        s = "_".to_owned();
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if is_keyword(&s) {
        s.push('_');
    }
    s
}

/// A Pascal-case name part: `update_network` -> `UpdateNetwork`, `802.3ad` -> `V8023ad`,
/// `` -> `Empty`.
pub fn pascal(wire: &str) -> String {
    let mut s = wire
        .replace(['.', '+', '/', ':', ' '], "_")
        .to_upper_camel_case();
    s.retain(|c| c.is_ascii_alphanumeric() || c == '_');
    if s.is_empty() {
        return if wire.is_empty() {
            "Empty".to_owned()
        } else {
            "V".to_owned()
        };
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'V');
    }
    s
}

/// A standalone type name: [`pascal`], with keywords and prelude names (`Copy`, `Option`, ...)
/// escaped by a trailing `_`. Names built by concatenation (`CopyResponse`) use [`pascal`].
pub fn type_name(wire: &str) -> String {
    let mut s = pascal(wire);
    if is_keyword(&s) || PRELUDE.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// An enum variant name: [`pascal`], with keywords escaped by a trailing `_`.
pub fn variant_name(wire: &str) -> String {
    let mut s = pascal(wire);
    if is_keyword(&s) {
        s.push('_');
    }
    s
}

/// Why `ident` (a name made by [`snake`]) cannot be a Rust module or field name, if it cannot:
/// `_` names nothing, and only ASCII letters, digits and `_` are allowed (non-ASCII names are
/// valid Rust but make file names and lints (`non_ascii_idents`) depend on the platform).
pub fn ident_problem(ident: &str) -> Option<&'static str> {
    if ident.is_empty() || ident.bytes().all(|c| c == b'_') {
        return Some("which names nothing in Rust");
    }
    if !ident
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_')
    {
        return Some("which holds characters other than ASCII letters, digits and `_`");
    }
    if ident.starts_with(|c: char| c.is_ascii_digit()) {
        return Some("which starts with a digit");
    }
    None
}

/// The name part of an operation's types (`{Base}`, `{Base}Response`, `{Base}Error`): its
/// handler (`update_network` -> `UpdateNetwork`), except PVE's list handlers, all named
/// `index`, which read as `List` and their path's last fixed segment (`GET /access/users` ->
/// `ListUsers`, `GET /nodes/{node}/storage/{storage}/content` -> `ListContent`), so a call
/// site needs no renaming import. A module holds one path, so two of them never meet in one
/// module; any other clash is still a generation error.
pub fn op_base(handler: &str, path: &str) -> String {
    if handler == "index" {
        let last = path
            .split('/')
            .rev()
            .find(|s| !s.is_empty() && !s.starts_with('{'))
            .unwrap_or("root");
        return format!("List{}", pascal(last));
    }
    pascal(handler)
}

/// The request type of an operation: [`op_base`], escaped like [`type_name`].
pub fn op_type_name(handler: &str, path: &str) -> String {
    if handler == "index" {
        return op_base(handler, path);
    }
    type_name(handler)
}

/// The base name of an indexed parameter: `net[n]` -> `Some("net")`.
pub fn indexed_base(wire: &str) -> Option<&str> {
    wire.strip_suffix("[n]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_names() {
        assert_eq!(snake("bond-primary"), "bond_primary");
        assert_eq!(snake("type"), "type_");
        assert_eq!(snake("CSRFPreventionToken"), "csrf_prevention_token");
        assert_eq!(snake("8021q"), "_8021q");
        assert_eq!(snake("route-maps"), "route_maps");
        assert_eq!(snake("self"), "self_");
    }

    #[test]
    fn names_that_cannot_be_identifiers() {
        for wire in ["_", "__", "-", "!!", ""] {
            assert!(ident_problem(&snake(wire)).is_some(), "{wire:?}");
        }
        assert!(ident_problem(&snake("é")).is_some());
        assert!(ident_problem(&snake("Über-x")).is_some());
        for wire in ["self", "8021q", "a%b", "crate", "bond-primary"] {
            assert_eq!(ident_problem(&snake(wire)), None, "{wire:?}");
        }
    }

    #[test]
    fn list_handlers_say_what_they_list() {
        assert_eq!(op_type_name("index", "/access/users"), "ListUsers");
        assert_eq!(
            op_type_name("index", "/cluster/qemu/cpu-flags"),
            "ListCpuFlags"
        );
        assert_eq!(
            op_type_name("index", "/nodes/{node}/storage/{storage}/content"),
            "ListContent"
        );
        assert_eq!(op_type_name("index", "/nodes/{node}"), "ListNodes");
        assert_eq!(op_type_name("copy", "/x"), "Copy_");
        assert_eq!(op_base("update_network", "/x"), "UpdateNetwork");
    }

    #[test]
    fn pascal_names() {
        assert_eq!(pascal("update_network"), "UpdateNetwork");
        assert_eq!(pascal("802.3ad"), "V8023ad");
        assert_eq!(pascal("layer2+3"), "Layer23");
        assert_eq!(pascal(""), "Empty");
        assert_eq!(pascal("e1000-82540em"), "E100082540em");
        assert_eq!(variant_name("Self"), "Self_");
        assert_eq!(type_name("copy"), "Copy_");
        assert_eq!(type_name("option"), "Option_");
        assert_eq!(pascal("copy"), "Copy");
    }
}
