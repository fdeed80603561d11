//! Stage `emit`: IR -> Rust token streams, one file per module.
//!
//! Generated code is shaped for compile time: each operation is a struct plus an `Operation`
//! impl of constants; encoding, decoding, property-string parsing, open enums and error
//! plumbing are generic runtime code or short `macro_rules!` calls into the runtime.

use std::collections::BTreeMap;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::ir::{Api, Field, ModPath, Module, Op, PropString, Ty, TypeDef, TypeKind};

/// Top-level modules that have a cargo feature of the same name.
pub const FEATURES: &[&str] = crate::features::TOPS;

/// The relative path (below `sdk/src/generated/`) of each module's file, with its tokens.
pub fn emit(api: &Api) -> BTreeMap<String, TokenStream> {
    let mut out = BTreeMap::new();
    let features = crate::features::Features::of(api);
    for (path, module) in &api.modules {
        out.insert(
            file_name(path, module),
            module_tokens(api, &features, path, module),
        );
    }
    out.insert("index.rs".to_owned(), index_tokens(api));
    out.insert("errors.rs".to_owned(), errors_tokens(api));
    out.insert("formats.rs".to_owned(), formats_tokens(api));
    out.insert(
        "samples.rs".to_owned(),
        crate::samples::samples_tokens(api, &features),
    );
    out
}

/// The constant of a format in `generated::formats`: `pve-node` -> `PVE_NODE`.
pub fn format_const(name: &str) -> String {
    crate::names::snake(name).to_uppercase()
}

fn formats_tokens(api: &Api) -> TokenStream {
    let defs = api.formats.iter().map(|f| {
        let c = format_ident!("{}", format_const(&f.name));
        let name = &f.name;
        let pattern = &f.pattern;
        let source = &f.evidence;
        let opt = |v: Option<usize>| match v {
            Some(n) => {
                let n = proc_macro2::Literal::usize_unsuffixed(n);
                quote!(Some(#n))
            }
            None => quote!(None),
        };
        let min = opt(f.min_length);
        let max = opt(f.max_length);
        let keys = match &f.keys {
            Some(k) => quote!(Some(#k)),
            None => quote!(None),
        };
        let mut text = match &f.keys {
            Some(k) => format!(
                "`{name}`: a property string, its keys `{}`",
                k.replace('`', "'")
            ),
            None => format!("`{name}`: `{}`", pattern.replace('`', "'")),
        };
        match (f.min_length, f.max_length) {
            (Some(a), Some(b)) => text.push_str(&format!(", {a} to {b} characters")),
            (Some(a), None) => text.push_str(&format!(", at least {a} characters")),
            (None, Some(b)) => text.push_str(&format!(", at most {b} characters")),
            (None, None) => {}
        }
        text.push_str(&format!(
            ".\n\nUpstream: `{}`. Defined in `{}`.",
            source.replace('`', "'"),
            f.file
        ));
        let d = doc(&text);
        quote! {
            #d
            pub const #c: crate::validate::Format = crate::validate::Format {
                name: #name,
                pattern: #pattern,
                min_length: #min,
                max_length: #max,
                keys: #keys,
                source: #source,
            };
        }
    });
    let all = api
        .formats
        .iter()
        .map(|f| format_ident!("{}", format_const(&f.name)));
    quote! {
        //! The formats PVE verifies that the SDK checks too, with PVE's own regexes or, for a
        //! format PVE registers as a property string, its keys (from `patches/`, `kind =
        //! "formats"`): path parameters of these formats are checked before a request is sent,
        //! and `params::check` checks every parameter of these formats. Formats not listed here
        //! are not checked.
        #(#defs)*
        /// Every format above, sorted by name.
        pub const FORMATS: &[crate::validate::Format] = &[#(#all),*];
        /// The format named `name`, if the SDK checks it.
        pub fn by_name(name: &str) -> Option<&'static crate::validate::Format> {
            FORMATS
                .binary_search_by(|f| f.name.cmp(name))
                .ok()
                .and_then(|i| FORMATS.get(i))
        }
    }
}

/// The file of a module: `nodes/node/mod.rs` for a module with children, `version.rs` else.
pub fn file_name(path: &ModPath, module: &Module) -> String {
    if path.is_empty() {
        "mod.rs".to_owned()
    } else if module.children.is_empty() {
        format!("{}.rs", path.join("/"))
    } else {
        format!("{}/mod.rs", path.join("/"))
    }
}

fn ident(s: &str) -> Ident {
    Ident::new(s, Span::call_site())
}

/// Outer doc attributes (`///`), one per line.
fn doc(text: &str) -> TokenStream {
    doc_lines(text, false)
}

/// Inner doc attributes (`//!`), one per line.
fn inner_doc(text: &str) -> TokenStream {
    doc_lines(text, true)
}

fn doc_lines(text: &str, inner: bool) -> TokenStream {
    let lines = text.lines().map(|l| {
        let l = if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        };
        if inner {
            quote!(#![doc = #l])
        } else {
            quote!(#[doc = #l])
        }
    });
    quote!(#(#lines)*)
}

fn ty_tokens(ty: &Ty, here: &ModPath) -> TokenStream {
    match ty {
        Ty::String => quote!(String),
        Ty::Secret => quote!(crate::Secret),
        Ty::Integer => quote!(i64),
        Ty::Number => quote!(f64),
        Ty::Boolean => quote!(bool),
        Ty::Unit => quote!(()),
        Ty::Value => quote!(serde_json::Value),
        Ty::Upid => quote!(crate::Upid),
        Ty::JsonObject => quote!(serde_json::Map<String, serde_json::Value>),
        Ty::Vec(t) => {
            let t = ty_tokens(t, here);
            quote!(Vec<#t>)
        }
        Ty::Map(t) => {
            let t = ty_tokens(t, here);
            quote!(std::collections::BTreeMap<String, #t>)
        }
        Ty::Option(t) => {
            let t = ty_tokens(t, here);
            quote!(Option<#t>)
        }
        Ty::Named(r) => {
            let name = ident(&r.name);
            if &r.module == here {
                quote!(#name)
            } else {
                let segs = r.module.iter().map(|s| ident(s));
                quote!(crate::generated::#(#segs::)*#name)
            }
        }
        Ty::Indexed { item, spec } => {
            let item = ty_tokens(item, here);
            let spec = ident(spec);
            quote!(crate::Indexed<#item, crate::generated::index::#spec>)
        }
    }
}

fn field_doc(f: &Field) -> String {
    let mut parts = Vec::new();
    if let Some(d) = &f.description {
        parts.push(d.trim().to_owned());
        parts.push(String::new());
    }
    let mut facts = f.facts.clone();
    if f.wire != f.rust && !f.flatten {
        facts.insert(0, format!("wire name `{}`", f.wire));
    }
    if facts.is_empty() {
        facts.push(format!("`{}`", f.wire));
    }
    parts.push(sentence(&facts));
    parts.join("\n")
}

/// Facts joined into one line, first letter capitalized.
fn sentence(facts: &[String]) -> String {
    let text = facts.join("; ");
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => text,
    }
}

fn field_tokens(f: &Field, here: &ModPath, public: bool) -> TokenStream {
    let name = ident(&f.rust);
    let ty = ty_tokens(&f.ty, here);
    let ty = if f.required || matches!(f.ty, Ty::Indexed { .. }) {
        ty
    } else {
        quote!(Option<#ty>)
    };
    let d = doc(&field_doc(f));
    let vis = if public { quote!(pub) } else { quote!() };
    quote! {
        #d
        #vis #name: #ty,
    }
}

/// The name of a struct's field for unlisted keys: `other_keys`, or with `_` added until free.
fn other_keys_name(fields: &[Field]) -> String {
    let mut name = "other_keys".to_owned();
    while fields.iter().any(|f| f.rust == name) {
        name.push('_');
    }
    name
}

/// `Deserialize` through [`crate::de::Fields`]: one line per field, flattened fields last, and
/// the keys nobody took in `other` when given.
fn deserialize_impl(name: &Ident, fields: &[Field], other: Option<&str>) -> TokenStream {
    if fields.is_empty() && other.is_none() {
        return quote! {
            impl<'de> serde::Deserialize<'de> for #name {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    crate::de::Fields::new(d)?;
                    Ok(Self {})
                }
            }
        };
    }
    let mut plain = Vec::new();
    let mut indexed = Vec::new();
    let mut tagged = Vec::new();
    for f in fields {
        let n = ident(&f.rust);
        let wire = &f.wire;
        match (&f.ty, f.flatten, f.required) {
            (Ty::Indexed { .. }, _, _) => indexed.push(quote!(#n: f.indexed()?,)),
            (_, true, true) => tagged.push(quote!(#n: f.tagged()?,)),
            (_, true, false) => tagged.push(quote!(#n: f.tagged_opt()?,)),
            (_, false, true) => plain.push(quote!(#n: f.req(#wire)?,)),
            (_, false, false) => plain.push(quote!(#n: f.opt(#wire)?,)),
        }
    }
    let rest = match other {
        Some(o) => {
            let o = ident(o);
            quote!(#o: f.rest(),)
        }
        None => quote!(),
    };
    quote! {
        impl<'de> serde::Deserialize<'de> for #name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let mut f = crate::de::Fields::new(d)?;
                Ok(Self { #(#plain)* #(#indexed)* #(#tagged)* #rest })
            }
        }
    }
}

/// `Serialize` through [`crate::ser::Out`]: one line per field (unset ones left out), flattened
/// fields contributing their own keys, then the kept unknown keys when given.
fn serialize_impl(name: &Ident, fields: &[Field], other: Option<&str>) -> TokenStream {
    serialize_impl_with(name, fields, other, false)
}

/// `Serialize`; with `request`, indexed parameters are checked against their bound.
fn serialize_impl_with(
    name: &Ident,
    fields: &[Field],
    other: Option<&str>,
    request: bool,
) -> TokenStream {
    let lines = fields.iter().map(|f| {
        let n = ident(&f.rust);
        let wire = &f.wire;
        match (&f.ty, f.flatten, f.required) {
            (Ty::Indexed { .. }, _, _) if request => quote!(o.indexed_checked(&self.#n)?;),
            (Ty::Indexed { .. }, _, _) => quote!(o.indexed(&self.#n)?;),
            (_, true, true) => quote!(o.tagged(&self.#n)?;),
            (_, true, false) => quote!(o.tagged_opt(&self.#n)?;),
            (_, false, true) => quote!(o.req(#wire, &self.#n)?;),
            (_, false, false) => quote!(o.opt(#wire, &self.#n)?;),
        }
    });
    let rest = match other {
        Some(o) => {
            let o = ident(o);
            quote!(o.rest(&self.#o)?;)
        }
        None => quote!(),
    };
    let binding = if fields.is_empty() && other.is_none() {
        quote!(let o = crate::ser::Out::start(s)?;)
    } else {
        quote!(let mut o = crate::ser::Out::start(s)?;)
    };
    quote! {
        impl serde::Serialize for #name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                #binding
                #(#lines)*
                #rest
                o.end()
            }
        }
    }
}

/// Method names a setter must not take: the constructor, and methods of the traits generated
/// types implement (an inherent `clone(self, v)` would shadow `Clone::clone`).
pub const RESERVED_METHODS: &[&str] = &[
    "new",
    "clone",
    "clone_from",
    "to_owned",
    "to_string",
    "into",
    "eq",
    "ne",
    "fmt",
    "hash",
    "serialize",
    "deserialize",
    "default",
    "borrow",
    "from_str",
];

/// The setter of a field: its Rust name, or `with_<name>` when that is a reserved method name
/// (`Bwlimit::new().with_clone(100.0)`: an inherent `clone(self, v)` would shadow
/// `Clone::clone`, and `default(self, v)` would shadow `Default::default`).
pub fn setter_name(rust: &str) -> String {
    if RESERVED_METHODS.contains(&rust) {
        format!("with_{rust}")
    } else {
        rust.to_owned()
    }
}

/// A setter's parameter and how it becomes the field's value: `impl Into<String>` (and
/// `Secret`, `Vec`) so `&str` and friends work; the type itself for scalars, enums and
/// structs, where `Into` adds nothing but compile time (one generic function per setter).
fn setter_param(ty: &Ty, here: &ModPath) -> (TokenStream, TokenStream) {
    let t = ty_tokens(ty, here);
    match ty {
        Ty::String | Ty::Secret | Ty::Vec(_) => (quote!(impl Into<#t>), quote!(value.into())),
        _ => (t, quote!(value)),
    }
}

/// The argument and initializer of a required field in `new(...)`.
fn ctor_arg(f: &Field, here: &ModPath) -> (TokenStream, TokenStream) {
    let n = ident(&f.rust);
    match &f.ty {
        Ty::String => (quote!(#n: impl Into<String>), quote!(#n: #n.into())),
        Ty::Secret => (quote!(#n: impl Into<crate::Secret>), quote!(#n: #n.into())),
        ty => {
            let t = ty_tokens(ty, here);
            (quote!(#n: #t), quote!(#n))
        }
    }
}

/// `new(required...)` (with `other_keys` empty when given), and with `setters` a chainable
/// `#[must_use]` setter per optional field: `name(impl Into<T>)`, and for an indexed field
/// `net(index, impl Into<T>)` (an index above the bound is an encode error naming the key).
fn builder_tokens(
    name: &Ident,
    fields: &[Field],
    other: Option<&str>,
    here: &ModPath,
    setters: bool,
) -> TokenStream {
    let mut args = Vec::new();
    let mut inits = Vec::new();
    let mut sets = Vec::new();
    for f in fields {
        let n = ident(&f.rust);
        match &f.ty {
            Ty::Indexed { item, .. } => {
                inits.push(quote!(#n: crate::Indexed::new()));
                if setters {
                    let set = ident(&setter_name(&f.rust));
                    let (t, v) = setter_param(item, here);
                    let d = doc(&format!(
                        "Sets `{}` at `index` (an index above the bound fails when the request is encoded, naming the key).",
                        f.wire
                    ));
                    sets.push(quote! {
                        #d
                        #[must_use]
                        pub fn #set(mut self, index: u32, value: #t) -> Self {
                            self.#n.set(index, #v);
                            self
                        }
                    });
                }
            }
            _ if f.required => {
                let (a, i) = ctor_arg(f, here);
                args.push(a);
                inits.push(i);
            }
            ty => {
                inits.push(quote!(#n: None));
                if setters && !f.path_param {
                    let set = ident(&setter_name(&f.rust));
                    let (t, v) = setter_param(ty, here);
                    let d = doc(&format!("Sets `{}`.", f.wire));
                    sets.push(quote! {
                        #d
                        #[must_use]
                        pub fn #set(mut self, value: #t) -> Self {
                            self.#n = Some(#v);
                            self
                        }
                    });
                }
            }
        }
    }
    if let Some(o) = other {
        let o = ident(o);
        inits.push(quote!(#o: Default::default()));
    }
    let nd = if args.is_empty() {
        doc("A value with every field unset.")
    } else {
        doc("A value with every required field; optional ones start unset.")
    };
    quote! {
        impl #name {
            #nd
            #[allow(clippy::new_without_default, reason = "Default is derived where it applies")]
            pub fn new(#(#args),*) -> Self {
                Self { #(#inits),* }
            }
            #(#sets)*
        }
    }
}

fn has_required(fields: &[Field]) -> bool {
    fields
        .iter()
        .any(|f| f.required && !matches!(f.ty, Ty::Indexed { .. }))
}

fn header(api: &Api) -> String {
    format!(
        "// @generated by pve-codegen from {} (sha256 {}) + patches/. Do not edit.\n",
        api.spec_file, api.sha256
    )
}

/// The index page at the top of `generated`: every operation by PVE method and path, with its
/// request type (and so its `Response` and `Error` types) and PVE's handler name. rustdoc search
/// finds the same types by handler name and path (`#[doc(alias)]`); `pve-codegen diff --sdk`
/// reads this table for the names a user's code holds.
fn index_page(api: &Api) -> String {
    let mut rows: Vec<(String, String, String, String, String)> = Vec::new();
    for (path, module) in &api.modules {
        for op in &module.ops {
            let module_path = path.iter().map(|s| format!("{s}::")).collect::<String>();
            rows.push((
                op.path.clone(),
                op.verb.clone(),
                op.type_name.clone(),
                format!("crate::generated::{module_path}{}", op.type_name),
                op.handler.clone(),
            ));
        }
    }
    rows.sort();
    let mut out = String::from(
        "# Operations by path\n\n| Method | Path | Request type | PVE handler |\n|---|---|---|---|\n",
    );
    if api.dialect == crate::raw::Dialect::Pbs {
        // PBS's schema names no handlers: the column holds the names made from verb and path.
        out = out.replace("| PVE handler |", "| Name |");
    }
    for (path, verb, ty, link, handler) in rows {
        out.push_str(&format!(
            "| {verb} | `{path}` | [`{ty}`]({link}) | `{handler}` |\n"
        ));
    }
    out
}

/// The header line every generated file starts with.
pub fn file_header(api: &Api) -> String {
    header(api)
}

fn module_tokens(
    api: &Api,
    features: &crate::features::Features,
    path: &ModPath,
    module: &Module,
) -> TokenStream {
    let mut items = Vec::new();
    if path.is_empty() {
        let params = quote!(
            pub mod params;
        );
        let d = inner_doc(&format!(
            "Every operation of the {} API schema (`{}`), one module per API path.\n\nWritten by `pve-codegen`; nothing here is edited by hand.\n\n{}",
            match api.dialect {
                crate::raw::Dialect::Pve => format!("PVE {}", api.version),
                crate::raw::Dialect::Pbs => "PBS".to_owned(),
            },
            api.spec_file,
            index_page(api)
        ));
        items.push(quote! {
            #d
            #![allow(
                clippy::too_many_arguments,
                reason = "a request's constructor takes each required parameter"
            )]
            #![allow(
                clippy::large_enum_variant,
                reason = "union variants mirror the schema's field sets"
            )]
            #![allow(
                clippy::module_inception,
                reason = "modules mirror API paths, e.g. /storage/{storage}"
            )]
            pub mod errors;
            pub mod formats;
            pub mod index;
            #params
            #[cfg(test)]
            pub(crate) mod samples;
        });
    } else if let Some(url) = &module.url {
        let d = inner_doc(&format!("`{url}`"));
        items.push(d);
    } else {
        items.push(inner_doc("Types shared by the modules below."));
    }
    for child in &module.children {
        let c = ident(child);
        let cfg = features.module_cfg(path, child);
        items.push(quote!(#cfg pub mod #c;));
    }
    for op in &module.ops {
        items.push(op_tokens(op, path, holds_secret(api, &op.response)));
    }
    for t in &module.types {
        items.push(type_tokens(t, path));
    }
    quote!(#(#items)*)
}

fn op_doc(op: &Op) -> String {
    let mut lines = Vec::new();
    if let Some(d) = &op.description {
        lines.push(d.trim().to_owned());
        lines.push(String::new());
    }
    lines.push(format!(
        "`{} {}` (handler `{}`).",
        op.verb, op.path, op.handler
    ));
    lines.push(String::new());
    if let Some(c) = &op.permission_check {
        lines.push(format!("- Permission check: `{}`", c.replace('`', "'")));
    }
    if let Some(u) = &op.permission_user {
        lines.push(format!("- Permitted users: `{u}`"));
    }
    if op.permission_check.is_none() && op.permission_user.is_none() {
        lines.push("- Permissions: none stated".to_owned());
    }
    if let Some(p) = &op.proxyto {
        lines.push(format!("- Proxied to the node named by `{p}`"));
    }
    if op.protected {
        lines.push("- Runs in the privileged daemon".to_owned());
    }
    if !op.allowtoken {
        lines.push("- API tokens may not call it".to_owned());
    }
    if op.returns_task {
        lines.push("- Returns a task (UPID)".to_owned());
    }
    if op.since != (0, 0) {
        lines.push(format!("- Since: PVE {}.{}", op.since.0, op.since.1));
    }
    lines.join("\n")
}

/// Whether a type holds a `Secret` anywhere (fields of named types, union variants, items).
pub fn holds_secret(api: &Api, ty: &Ty) -> bool {
    fn walk(api: &Api, ty: &Ty, seen: &mut Vec<crate::ir::TypeRef>) -> bool {
        match ty {
            Ty::Secret => true,
            Ty::Vec(t) | Ty::Option(t) | Ty::Map(t) => walk(api, t, seen),
            Ty::Indexed { item, .. } => walk(api, item, seen),
            Ty::Named(r) => {
                if seen.contains(r) {
                    return false;
                }
                seen.push(r.clone());
                let Some(def) = api
                    .modules
                    .get(&r.module)
                    .and_then(|m| m.types.iter().find(|t| t.name == r.name))
                else {
                    return false;
                };
                match &def.kind {
                    TypeKind::Struct { fields } => fields.iter().any(|f| walk(api, &f.ty, seen)),
                    TypeKind::Tagged { variants, .. } => variants
                        .iter()
                        .any(|(_, _, fields)| fields.iter().any(|f| walk(api, &f.ty, seen))),
                    TypeKind::PropString(p) => p.fields.iter().any(|f| walk(api, &f.ty, seen)),
                    TypeKind::Enum { .. } => false,
                }
            }
            _ => false,
        }
    }
    walk(api, ty, &mut Vec::new())
}

/// The item type of an operation PVE pages with `start` and `limit` (optional integers) and
/// whose answer is a list: the task log, the task list, syslog, Ceph and firewall logs, ...
pub fn paged_item(op: &Op) -> Option<&Ty> {
    let int_param = |name: &str| {
        op.fields
            .iter()
            .any(|f| f.wire == name && f.ty == Ty::Integer && !f.required && !f.path_param)
    };
    match &op.response {
        Ty::Vec(item) if int_param("start") && int_param("limit") => Some(item),
        _ => None,
    }
}

fn op_tokens(op: &Op, here: &ModPath, response_secrets: bool) -> TokenStream {
    let name = ident(&op.type_name);
    let resp = ident(&op.response_name);
    let err = ident(&op.error_name);
    let d = doc(&op_doc(op));
    let fields: Vec<TokenStream> = op
        .fields
        .iter()
        .map(|f| field_tokens(f, here, true))
        .collect();
    let required = has_required(&op.fields);
    let derive = if required {
        quote!(#[derive(Debug, Clone)])
    } else {
        quote!(#[derive(Debug, Clone, Default)])
    };
    let ser = serialize_impl_with(&name, &op.fields, None, true);
    let de = if op.declarable {
        deserialize_impl(&name, &op.fields, None)
    } else {
        quote!()
    };
    let ctor = builder_tokens(&name, &op.fields, None, here, true);
    let secret_params: Vec<&str> = op
        .fields
        .iter()
        .filter(|f| match &f.ty {
            Ty::Secret => true,
            // A list of secrets (a webhook's `secret` and `header` entries).
            Ty::Vec(item) => matches!(**item, Ty::Secret),
            _ => false,
        })
        .map(|f| f.wire.as_str())
        .collect();
    let secret_params = if secret_params.is_empty() {
        quote!()
    } else {
        quote!(const SECRET_PARAMS: &'static [&'static str] = &[#(#secret_params),*];)
    };
    let id = &op.handler;
    let method = ident(match op.verb.as_str() {
        "GET" => "Get",
        "POST" => "Post",
        "PUT" => "Put",
        _ => "Delete",
    });
    let path = &op.path;
    let (maj, min) = op.since;
    let task = if op.returns_task {
        quote!(
            const RETURNS_TASK: bool = true;
        )
    } else {
        quote!()
    };
    let secrets = if response_secrets {
        quote!(
            const RESPONSE_SECRETS: bool = true;
        )
    } else {
        quote!()
    };
    let path_specs = if op.path_specs.is_empty() {
        quote!()
    } else {
        let specs = op.path_specs.iter().map(|p| {
            let name = &p.name;
            let rest = p.rest;
            let format = match &p.format {
                Some(f) => {
                    let c = format_ident!("{}", format_const(f));
                    quote!(Some(&crate::generated::formats::#c))
                }
                None => quote!(None),
            };
            quote!(crate::validate::PathParam { name: #name, rest: #rest, format: #format })
        });
        quote!(const PATH_PARAMS: &'static [crate::validate::PathParam] = &[#(#specs),*];)
    };
    let response_is_struct =
        matches!(&op.response, Ty::Named(r) if r.name == op.response_name && &r.module == here);
    let alias = if response_is_struct {
        quote!()
    } else {
        let t = ty_tokens(&op.response, here);
        let rd = doc(&format!("What [`{}`] answers.", op.type_name));
        quote!(#rd pub type #resp = #t;)
    };
    let variants: Vec<Ident> = op.error_variants.iter().map(|v| ident(v)).collect();
    let error = if variants.is_empty() {
        let ed = doc(&format!(
            "Errors of [`{}`]: PVE's answer (`Api`) or a client-side failure (`Client`); no typed variant yet.",
            op.type_name
        ));
        quote!(#ed pub type #err = crate::error::Untyped<#name>;)
    } else {
        let is = op
            .error_variants
            .iter()
            .map(|v| format_ident!("is_{}", crate::names::snake(v)));
        let absent = op.absent_variants.iter().map(|v| ident(v));
        quote!(crate::operation_error!(#err for #name; #(#variants => #is),*; absent: #(#absent),*);)
    };
    let maj = proc_macro2::Literal::u16_unsuffixed(maj);
    let min = proc_macro2::Literal::u16_unsuffixed(min);
    let paged = match paged_item(op) {
        Some(item) => {
            let item = ty_tokens(item, here);
            quote! {
                impl crate::pager::Paged for #name {
                    type Item = #item;
                    fn first_item(&self) -> u64 {
                        self.start.map_or(0, |s| s.max(0) as u64)
                    }
                    fn page(&self, start: u64, limit: u64) -> Self {
                        let mut page = self.clone();
                        page.start = Some(start.min(i64::MAX as u64) as i64);
                        page.limit = Some(limit.min(i64::MAX as u64) as i64);
                        page
                    }
                }
            }
        }
        None => quote!(),
    };
    // rustdoc search finds the type by PVE's handler name and by its path.
    let handler_alias = &op.handler;
    quote! {
        #paged
        #d
        #[doc(alias = #handler_alias, alias = #path)]
        #derive
        #[non_exhaustive]
        pub struct #name { #(#fields)* }
        #ser
        #de
        #ctor
        impl crate::Operation for #name {
            const PRODUCT: crate::Product = crate::Product::Pve;
            const ID: &'static str = #id;
            const METHOD: crate::Method = crate::Method::#method;
            const PATH: &'static str = #path;
            const SINCE: crate::PveVersion = crate::PveVersion::new(#maj, #min);
            #task
            #path_specs
            #secrets
            #secret_params
            type Response = #resp;
            type Error = #err;
        }
        #alias
        #error
    }
}

fn type_tokens(t: &TypeDef, here: &ModPath) -> TokenStream {
    let name = ident(&t.name);
    let d = doc(&t.facts.join("\n\n"));
    match &t.kind {
        TypeKind::Enum { variants } => {
            let vs = variants.iter().map(|(rust, wire)| {
                let v = ident(rust);
                let vd = doc(&format!("`{wire}`"));
                quote!(#vd #v,)
            });
            let from = variants.iter().map(|(rust, wire)| {
                let v = ident(rust);
                quote!(#wire => Self::#v,)
            });
            let to = variants.iter().map(|(rust, wire)| {
                let v = ident(rust);
                quote!(Self::#v => #wire,)
            });
            let values = variants.iter().map(|(_, wire)| wire);
            let d = if t.facts.is_empty() {
                doc("Values of this field in the schema; `Other` holds any value a newer PVE adds.")
            } else {
                d
            };
            quote! {
                #d
                #[derive(Debug, Clone, PartialEq, Eq, Hash)]
                #[non_exhaustive]
                pub enum #name {
                    #(#vs)*
                    /// A value this version of the schema does not list.
                    Other(String),
                }
                impl crate::open_enum::OpenEnum for #name {
                    const VALUES: &'static [&'static str] = &[#(#values),*];
                    fn from_wire(text: &str) -> Self {
                        match text {
                            #(#from)*
                            other => Self::Other(other.to_owned()),
                        }
                    }
                    fn as_str(&self) -> &str {
                        match self {
                            #(#to)*
                            Self::Other(s) => s,
                        }
                    }
                }
                crate::open_enum_traits!(#name);
            }
        }
        TypeKind::Struct { fields } => {
            let fs = fields.iter().map(|f| field_tokens(f, here, true));
            let d = if t.facts.is_empty() {
                doc(&format!("From `{}`.", t.location.replace('`', "'")))
            } else {
                d
            };
            let other = other_keys_name(fields);
            let other_ident = ident(&other);
            let de = deserialize_impl(&name, fields, Some(&other));
            let ser = serialize_impl(&name, fields, Some(&other));
            let derive = if has_required(fields) {
                quote!(#[derive(Debug, Clone, PartialEq)])
            } else {
                quote!(#[derive(Debug, Clone, Default, PartialEq)])
            };
            // Default builds an answer without required fields; `new` the others.
            let ctor = if has_required(fields) {
                builder_tokens(&name, fields, Some(&other), here, false)
            } else {
                quote!()
            };
            quote! {
                #d
                #derive
                #[non_exhaustive]
                pub struct #name {
                    #(#fs)*
                    /// Keys PVE sent that this version of the schema does not list, kept as sent.
                    pub #other_ident: serde_json::Map<String, serde_json::Value>,
                }
                #ctor
                #de
                #ser
            }
        }
        TypeKind::Tagged { tag, variants, .. } => {
            let mut arms = Vec::new();
            let mut structs = Vec::new();
            let mut tags = Vec::new();
            let mut fields_arms = Vec::new();
            let mut from_arms = Vec::new();
            for (wire, rust, fields) in variants {
                let v = ident(rust);
                let sname = format_ident!("{}{}", t.name, rust);
                let vd = doc(&format!("`{tag}` = `{wire}`"));
                arms.push(quote!(#vd #v(#sname),));
                let fs = fields.iter().map(|f| field_tokens(f, here, true));
                let sd = doc(&format!("Fields of [`{}::{}`].", t.name, rust));
                let derive = if has_required(fields) {
                    quote!(#[derive(Debug, Clone, PartialEq)])
                } else {
                    quote!(#[derive(Debug, Clone, Default, PartialEq)])
                };
                let de = deserialize_impl(&sname, fields, None);
                let ser = serialize_impl(&sname, fields, None);
                let ctor = builder_tokens(&sname, fields, None, here, true);
                structs.push(quote! {
                    #sd
                    #derive
                    #[non_exhaustive]
                    pub struct #sname { #(#fs)* }
                    #ctor
                    #de
                    #ser
                });
                tags.push(quote!(Self::#v(_) => #wire,));
                fields_arms.push(quote!(Self::#v(v) => crate::tagged::to_fields(v),));
                from_arms.push(quote!(#wire => crate::tagged::from_fields(fields).map(Self::#v),));
            }
            quote! {
                #d
                #[derive(Debug, Clone, PartialEq)]
                #[non_exhaustive]
                pub enum #name {
                    #(#arms)*
                    /// A variant this version of the schema does not know, with its fields as sent.
                    Other {
                        /// The tag value.
                        tag: String,
                        /// The variant's fields.
                        fields: serde_json::Map<String, serde_json::Value>,
                    },
                }
                impl crate::tagged::Tagged for #name {
                    const TAG: &'static str = #tag;
                    fn tag(&self) -> &str {
                        match self {
                            #(#tags)*
                            Self::Other { tag, .. } => tag,
                        }
                    }
                    fn fields(&self) -> Result<serde_json::Map<String, serde_json::Value>, serde_json::Error> {
                        match self {
                            #(#fields_arms)*
                            Self::Other { fields, .. } => Ok(fields.clone()),
                        }
                    }
                    fn from_parts(
                        tag: String,
                        fields: serde_json::Map<String, serde_json::Value>,
                    ) -> Result<Self, serde_json::Error> {
                        match tag.as_str() {
                            #(#from_arms)*
                            _ => Ok(Self::Other { tag, fields }),
                        }
                    }
                }
                crate::tagged_traits!(#name);
                #(#structs)*
            }
        }
        TypeKind::PropString(p) => prop_tokens(&name, p, &d, here),
    }
}

fn prop_tokens(name: &Ident, p: &PropString, d: &TokenStream, here: &ModPath) -> TokenStream {
    let mut fields = Vec::new();
    let mut takes = Vec::new();
    let mut puts = Vec::new();
    for f in &p.fields {
        let n = ident(&f.rust);
        let ty = ty_tokens(&f.ty, here);
        let key = &f.key;
        let mut facts = f.facts.clone();
        if f.key != f.rust || facts.is_empty() {
            facts.insert(0, format!("key `{}`", f.key));
        }
        let fd = doc(&sentence(&facts));
        if f.required {
            fields.push(quote!(#fd pub #n: #ty,));
            takes.push(quote!(#n: p.req(#key)?,));
            puts.push(quote!(out.req(#key, &self.#n);));
        } else {
            fields.push(quote!(#fd pub #n: Option<#ty>,));
            takes.push(quote!(#n: p.opt(#key)?,));
            puts.push(quote!(out.opt(#key, &self.#n);));
        }
    }
    let other = ident(&p.other_keys);
    let keys = p.fields.iter().map(|f| f.key.as_str());
    let default_key = match &p.default_key {
        Some(k) => quote!(Some(#k)),
        None => quote!(None),
    };
    let aliases = p.aliases.iter().map(|(key, alias, ka)| {
        let ka = match ka {
            Some(k) => quote!(Some(#k)),
            None => quote!(None),
        };
        quote!(crate::propstr::AliasSpec { key: #key, alias: #alias, key_alias: #ka })
    });
    let derive = if p.fields.iter().any(|f| f.required) {
        quote!(#[derive(Debug, Clone, PartialEq)])
    } else {
        quote!(#[derive(Debug, Clone, Default, PartialEq)])
    };
    let mut ctor_args = Vec::new();
    let mut ctor_inits = Vec::new();
    let mut sets = Vec::new();
    for f in &p.fields {
        let n = ident(&f.rust);
        let ty = ty_tokens(&f.ty, here);
        if f.required {
            if f.ty == Ty::String {
                ctor_args.push(quote!(#n: impl Into<String>));
                ctor_inits.push(quote!(#n: #n.into()));
            } else {
                ctor_args.push(quote!(#n: #ty));
                ctor_inits.push(quote!(#n));
            }
        } else {
            ctor_inits.push(quote!(#n: None));
            let sd = doc(&format!("Sets `{}`.", f.key));
            let set = ident(&setter_name(&f.rust));
            let (t, v) = setter_param(&f.ty, here);
            sets.push(quote! {
                #sd
                #[must_use]
                pub fn #set(mut self, value: #t) -> Self {
                    self.#n = Some(#v);
                    self
                }
            });
        }
    }
    let nd = if ctor_args.is_empty() {
        doc("A value with every key unset.")
    } else {
        doc("A value with every required key; optional ones start unset.")
    };
    quote! {
        #d
        #derive
        #[non_exhaustive]
        pub struct #name {
            #(#fields)*
            /// Keys this version of the schema does not know, kept as written.
            pub #other: std::collections::BTreeMap<String, String>,
        }
        impl #name {
            #nd
            #[allow(clippy::new_without_default, reason = "Default is derived where it applies")]
            pub fn new(#(#ctor_args),*) -> Self {
                Self { #(#ctor_inits,)* #other: std::collections::BTreeMap::new() }
            }
            #(#sets)*
        }
        impl crate::PropertyString for #name {
            const SPEC: crate::propstr::PropSpec = crate::propstr::PropSpec {
                keys: &[#(#keys),*],
                default_key: #default_key,
                aliases: &[#(#aliases),*],
            };
            fn from_pairs(p: &mut crate::propstr::Pairs) -> Result<Self, crate::propstr::PropError> {
                Ok(Self { #(#takes)* #other: p.rest() })
            }
            fn to_pairs<'a>(&'a self, out: &mut crate::propstr::PairsOut<'a>) {
                #(#puts)*
                out.rest(&self.#other);
            }
        }
        crate::property_string!(#name);
    }
}

fn index_tokens(api: &Api) -> TokenStream {
    let specs = api.index_specs.iter().map(|(name, s)| {
        let n = format_ident!("{}", name);
        let prefix = &s.prefix;
        let max = s.max;
        let d = doc(&format!(
            "`{prefix}[n]`: keys `{prefix}0` to `{prefix}{max}` (bound from `{}`).",
            s.source
        ));
        quote! {
            #d
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub struct #n;
            impl crate::IndexSpec for #n {
                const PREFIX: &'static str = #prefix;
                const MAX: u32 = #max;
            }
        }
    });
    quote! {
        //! Index specs of indexed parameters (`net[n]`, `scsi[n]`, ...): wire prefix and bound.
        #(#specs)*
    }
}

fn errors_tokens(api: &Api) -> TokenStream {
    let defs = api.errors.iter().map(|v| {
        let name = format_ident!("{}", v.name);
        let fields: Vec<Ident> = v
            .fields
            .iter()
            .map(|f| ident(&crate::names::snake(f)))
            .collect();
        let wires = v.fields.iter();
        let matchers = v.matchers.iter().map(|m| {
            let status = proc_macro2::Literal::u16_unsuffixed(m.status);
            let pattern = &m.pattern;
            let field = match &m.field {
                Some(f) => quote!(Some(#f)),
                None => quote!(None),
            };
            quote!(crate::error::Matcher { status: #status, field: #field, pattern: #pattern })
        });
        // Display: literal text with `{field}` placeholders as format arguments.
        let mut fmt = String::new();
        let mut args = Vec::new();
        let mut rest = v.display.as_str();
        while let Some(open) = rest.find('{') {
            fmt.push_str(&rest[..open].replace('}', "}}"));
            let after = &rest[open + 1..];
            let close = after.find('}').unwrap_or(after.len());
            let f = ident(&crate::names::snake(&after[..close]));
            fmt.push_str("{}");
            args.push(quote!(self.#f));
            rest = after.get(close + 1..).unwrap_or("");
        }
        fmt.push_str(&rest.replace('}', "}}"));
        let d = doc(&format!(
            "{}\n\nRecognised by: {}. Defined in {}. Raised by {} operations.",
            v.doc,
            v.matchers
                .iter()
                .map(|m| match &m.field {
                    Some(f) => format!(
                        "HTTP {} with `errors.{f}` matching `{}`",
                        m.status,
                        m.pattern.replace('`', "'")
                    ),
                    None => format!(
                        "HTTP {} with a message matching `{}`",
                        m.status,
                        m.pattern.replace('`', "'")
                    ),
                })
                .collect::<Vec<_>>()
                .join("; "),
            v.files
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", "),
            v.operations.len()
        ));
        let field_docs = v
            .fields
            .iter()
            .map(|f| format!(" `{f}` from the answer or the path."));
        let build = if v.fields.is_empty() {
            quote! {
                fn build(_captures: crate::error::Captures, api: crate::ApiError) -> Self {
                    Self { api }
                }
            }
        } else {
            quote! {
                fn build(mut captures: crate::error::Captures, api: crate::ApiError) -> Self {
                    Self { #( #fields: captures.take(#wires), )* api }
                }
            }
        };
        quote! {
            #d
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct #name {
                #( #[doc = #field_docs] pub #fields: String, )*
                /// The answer as PVE gave it.
                pub api: crate::ApiError,
            }
            impl crate::error::TypedError for #name {
                const MATCHERS: &'static [crate::error::Matcher] = &[#(#matchers),*];
                #build
                fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    write!(f, #fmt, #(#args),*)
                }
                fn api(&self) -> &crate::ApiError {
                    &self.api
                }
            }
            crate::typed_error_traits!(#name);
        }
    });
    let matcher_docs = |ms: &[crate::patch::ErrorMatcher]| {
        ms.iter()
            .map(|m| match &m.field {
                Some(f) => format!(
                    "HTTP {} with `errors.{f}` matching `{}`",
                    m.status,
                    m.pattern.replace('`', "'")
                ),
                None => format!(
                    "HTTP {} with a message matching `{}`",
                    m.status,
                    m.pattern.replace('`', "'")
                ),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let predicates = api.predicates.iter().map(|p| {
        let name = format_ident!("{}", p.name);
        let d = doc(&format!(
            "{}\n\nRecognised by: {}. Defined in {}.",
            p.doc,
            matcher_docs(&p.matchers),
            p.files
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let matchers = p.matchers.iter().map(|m| {
            let status = proc_macro2::Literal::u16_unsuffixed(m.status);
            let pattern = &m.pattern;
            let field = match &m.field {
                Some(f) => quote!(Some(#f)),
                None => quote!(None),
            };
            quote!(crate::error::Matcher { status: #status, field: #field, pattern: #pattern })
        });
        quote! {
            #d
            fn #name(&self) -> bool {
                self.api_error()
                    .is_some_and(|a| crate::error::matches_any(&[#(#matchers),*], a))
            }
        }
    });
    quote! {
        //! Typed PVE errors assigned by `patches/` (`kind = "error"`): each recognises one PVE
        //! answer exactly and is a variant of the error enum of every operation it is assigned to.
        //! And the predicates every operation's error offers (`kind = "predicate"`), for answers
        //! any operation can get.
        #(#defs)*
        /// Predicates on every operation's error, from `patches/` (`kind = "predicate"`): answers
        /// any operation can get, told apart without a variant in every error enum. In scope with
        /// `use pve_sdk::ErrorPredicates;`.
        pub trait ErrorPredicates: crate::OperationError {
            #(#predicates)*
        }
        impl<T: crate::OperationError> ErrorPredicates for T {}
    }
}
