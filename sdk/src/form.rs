//! Encoding a request: path rendering and PVE's flat form of `key=value` pairs.
//!
//! PVE takes every parameter as a flat string: booleans as `0`/`1`, numbers in decimal,
//! property strings in their `k=v,...` form, indexed parameters as `net0`, `net1`, ... and
//! arrays as repeated keys. [`to_pairs`] turns any generated request into those pairs with one
//! serde serializer, so generated code needs no per-field attributes.

use std::fmt;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::ser::{self, Impossible, Serialize};

use crate::operation::{Method, Operation};
use crate::validate::{check_path_value, PathParam, PathProblem};

/// Why a request could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    /// The request serialized to something other than a flat set of fields.
    #[error("cannot encode {what} as a PVE form value (field `{field}`)")]
    Unsupported {
        /// The serde shape that has no form encoding.
        what: &'static str,
        /// The field it appeared in (empty at the top level).
        field: String,
    },
    /// A path parameter had no value.
    #[error("path parameter `{0}` has no value")]
    MissingPathParam(String),
    /// A path parameter's value would make the request reach another endpoint, or is not
    /// valid in the format PVE checks it with ([`crate::validate`]). Nothing was sent.
    #[error("path parameter `{name}` = {value} {problem}")]
    PathParam {
        /// The parameter.
        name: String,
        /// Its value, quoted (and cut after 80 characters).
        value: String,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// A number that PVE cannot read (NaN or infinite).
    #[error("field `{0}` is not a finite number")]
    NotFinite(String),
    /// A field's value has no encoding PVE can read back (a property string with a comma in
    /// a value, ...).
    #[error("field `{field}`: {message}")]
    Field {
        /// The field (wire name).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Any other serializer message.
    #[error("{0}")]
    Custom(String),
}

impl ser::Error for FormError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        FormError::Custom(msg.to_string())
    }
}

/// A request ready to send: method, rendered path (percent-encoded, below `/api2/json`) and the
/// parameters that are not in the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedRequest {
    /// HTTP method.
    pub method: Method,
    /// Rendered path, e.g. `/nodes/pve1/network/vmbr0`.
    pub path: String,
    /// Query (GET, DELETE) or form body (POST, PUT) parameters, in field order.
    pub params: Vec<(String, String)>,
}

/// Characters left as they are in a path segment; everything else is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':')
    .remove(b'@');

/// Encodes a request: takes the path parameters out of its fields, renders the path template with
/// each value percent-encoded as one segment, and keeps the rest as parameters.
///
/// # Errors
///
/// [`FormError`] when a field has no form encoding, or a path parameter is missing or refused
/// by [`crate::validate::check_path_value`].
pub fn encode<O: Operation>(request: &O) -> Result<EncodedRequest, FormError> {
    let mut params = to_pairs(request)?;
    let path = render_path(O::PATH, O::PATH_PARAMS, &mut params)?;
    Ok(EncodedRequest {
        method: O::METHOD,
        path,
        params,
    })
}

/// One path segment, percent-encoded.
pub(crate) fn encode_segment(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// Renders `template` (`/nodes/{node}/qemu/{vmid}`), removing each `{name}` from `params`.
///
/// Every value is checked first ([`crate::validate::check_path_value`], with what `specs` says
/// of the parameter: rest of path, format), then percent-encoded as one segment.
///
/// # Errors
///
/// [`FormError::MissingPathParam`] or [`FormError::PathParam`].
pub fn render_path(
    template: &str,
    specs: &[PathParam],
    params: &mut Vec<(String, String)>,
) -> Result<String, FormError> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| {
            FormError::Custom(format!("unclosed `{{` in path template {template}"))
        })?;
        let name = &after[..close];
        let pos = params
            .iter()
            .position(|(k, _)| k == name)
            .ok_or_else(|| FormError::MissingPathParam(name.to_owned()))?;
        let (_, value) = params.remove(pos);
        let spec = specs.iter().find(|s| s.name == name);
        if let Err(problem) = check_path_value(&value, spec) {
            return Err(FormError::PathParam {
                name: name.to_owned(),
                value: quoted(&value),
                problem,
            });
        }
        out.extend(utf8_percent_encode(&value, SEGMENT));
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `value` Debug-quoted, cut after 80 characters.
pub(crate) fn quoted(value: &str) -> String {
    if value.chars().count() <= 80 {
        return format!("{value:?}");
    }
    let cut: String = value.chars().take(80).collect();
    format!("{cut:?}...")
}

/// Serializes a struct (or map) into PVE's flat `key=value` pairs.
///
/// `None` fields are left out, booleans become `0`/`1`, sequences repeat their key, and maps
/// (flattened indexed parameters, typed maps) contribute their entries as keys.
///
/// # Errors
///
/// [`FormError::Unsupported`] for nested structures that have no flat form.
pub fn to_pairs<T: Serialize + ?Sized>(value: &T) -> Result<Vec<(String, String)>, FormError> {
    let mut out = Vec::new();
    value.serialize(TopSerializer { out: &mut out })?;
    Ok(out)
}

#[derive(Debug)]
struct TopSerializer<'a> {
    out: &'a mut Vec<(String, String)>,
}

macro_rules! top_unsupported {
    ($($name:ident($($t:ty),*) $what:literal;)*) => {$(
        fn $name(self, $(_: $t),*) -> Result<(), FormError> {
            Err(FormError::Unsupported { what: $what, field: String::new() })
        }
    )*};
}

impl<'a> ser::Serializer for TopSerializer<'a> {
    type Ok = ();
    type Error = FormError;
    type SerializeSeq = Impossible<(), FormError>;
    type SerializeTuple = Impossible<(), FormError>;
    type SerializeTupleStruct = Impossible<(), FormError>;
    type SerializeTupleVariant = Impossible<(), FormError>;
    type SerializeMap = FieldsSerializer<'a>;
    type SerializeStruct = FieldsSerializer<'a>;
    type SerializeStructVariant = Impossible<(), FormError>;

    top_unsupported! {
        serialize_bool(bool) "a boolean";
        serialize_i8(i8) "a number";
        serialize_i16(i16) "a number";
        serialize_i32(i32) "a number";
        serialize_i64(i64) "a number";
        serialize_u8(u8) "a number";
        serialize_u16(u16) "a number";
        serialize_u32(u32) "a number";
        serialize_u64(u64) "a number";
        serialize_f32(f32) "a number";
        serialize_f64(f64) "a number";
        serialize_char(char) "a character";
        serialize_str(&str) "a string";
        serialize_bytes(&[u8]) "bytes";
        serialize_unit_variant(&'static str, u32, &'static str) "an enum";
    }

    fn serialize_none(self) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), FormError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), FormError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), FormError> {
        Err(FormError::Unsupported {
            what: "an enum",
            field: String::new(),
        })
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, FormError> {
        Err(FormError::Unsupported {
            what: "a sequence",
            field: String::new(),
        })
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, FormError> {
        Err(FormError::Unsupported {
            what: "a tuple",
            field: String::new(),
        })
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, FormError> {
        Err(FormError::Unsupported {
            what: "a tuple",
            field: String::new(),
        })
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, FormError> {
        Err(FormError::Unsupported {
            what: "an enum",
            field: String::new(),
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, FormError> {
        Ok(FieldsSerializer {
            out: self.out,
            key: None,
        })
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, FormError> {
        Ok(FieldsSerializer {
            out: self.out,
            key: None,
        })
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, FormError> {
        Err(FormError::Unsupported {
            what: "an enum",
            field: String::new(),
        })
    }
}

#[doc(hidden)]
#[derive(Debug)]
pub struct FieldsSerializer<'a> {
    out: &'a mut Vec<(String, String)>,
    key: Option<String>,
}

/// A field's serializer message, naming the field (property strings refuse values PVE's
/// grammar cannot carry this way).
fn in_field(key: &str, e: FormError) -> FormError {
    match e {
        FormError::Custom(message) => FormError::Field {
            field: key.to_owned(),
            message,
        },
        other => other,
    }
}

impl ser::SerializeStruct for FieldsSerializer<'_> {
    type Ok = ();
    type Error = FormError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), FormError> {
        value
            .serialize(ValueSerializer {
                key,
                out: self.out,
                in_seq: false,
            })
            .map_err(|e| in_field(key, e))
    }

    fn end(self) -> Result<(), FormError> {
        Ok(())
    }
}

impl ser::SerializeMap for FieldsSerializer<'_> {
    type Ok = ();
    type Error = FormError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), FormError> {
        self.key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), FormError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| FormError::Custom("map value without a key".to_owned()))?;
        value
            .serialize(ValueSerializer {
                key: &key,
                out: self.out,
                in_seq: false,
            })
            .map_err(|e| in_field(&key, e))
    }

    fn end(self) -> Result<(), FormError> {
        Ok(())
    }
}

/// Serializes one field's value under `key`.
struct ValueSerializer<'a, 'k> {
    key: &'k str,
    out: &'a mut Vec<(String, String)>,
    in_seq: bool,
}

impl ValueSerializer<'_, '_> {
    fn push(self, value: String) -> Result<(), FormError> {
        self.out.push((self.key.to_owned(), value));
        Ok(())
    }

    fn unsupported(&self, what: &'static str) -> FormError {
        FormError::Unsupported {
            what,
            field: self.key.to_owned(),
        }
    }
}

macro_rules! value_display {
    ($($name:ident($t:ty);)*) => {$(
        fn $name(self, v: $t) -> Result<(), FormError> {
            self.push(v.to_string())
        }
    )*};
}

impl<'a, 'k> ser::Serializer for ValueSerializer<'a, 'k> {
    type Ok = ();
    type Error = FormError;
    type SerializeSeq = SeqSerializer<'a, 'k>;
    type SerializeTuple = SeqSerializer<'a, 'k>;
    type SerializeTupleStruct = Impossible<(), FormError>;
    type SerializeTupleVariant = Impossible<(), FormError>;
    type SerializeMap = Impossible<(), FormError>;
    type SerializeStruct = Impossible<(), FormError>;
    type SerializeStructVariant = Impossible<(), FormError>;

    value_display! {
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_i128(i128);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_u128(u128);
        serialize_char(char);
    }

    fn serialize_bool(self, v: bool) -> Result<(), FormError> {
        self.push(if v { "1" } else { "0" }.to_owned())
    }

    fn serialize_f32(self, v: f32) -> Result<(), FormError> {
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), FormError> {
        if !v.is_finite() {
            return Err(FormError::NotFinite(self.key.to_owned()));
        }
        self.push(v.to_string())
    }

    fn serialize_str(self, v: &str) -> Result<(), FormError> {
        self.push(v.to_owned())
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<(), FormError> {
        Err(self.unsupported("bytes"))
    }

    fn serialize_none(self) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), FormError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), FormError> {
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), FormError> {
        self.push(variant.to_owned())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), FormError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), FormError> {
        Err(self.unsupported("an enum with data"))
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, FormError> {
        if self.in_seq {
            return Err(self.unsupported("a nested sequence"));
        }
        Ok(SeqSerializer {
            key: self.key,
            out: self.out,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, FormError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, FormError> {
        Err(self.unsupported("a tuple struct"))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, FormError> {
        Err(self.unsupported("an enum with data"))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, FormError> {
        Err(self.unsupported("a nested map"))
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, FormError> {
        Err(self.unsupported("a nested struct"))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, FormError> {
        Err(self.unsupported("an enum with data"))
    }
}

#[doc(hidden)]
#[derive(Debug)]
pub struct SeqSerializer<'a, 'k> {
    key: &'k str,
    out: &'a mut Vec<(String, String)>,
}

impl ser::SerializeSeq for SeqSerializer<'_, '_> {
    type Ok = ();
    type Error = FormError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), FormError> {
        value.serialize(ValueSerializer {
            key: self.key,
            out: &mut *self.out,
            in_seq: true,
        })
    }

    fn end(self) -> Result<(), FormError> {
        Ok(())
    }
}

impl ser::SerializeTuple for SeqSerializer<'_, '_> {
    type Ok = ();
    type Error = FormError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), FormError> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<(), FormError> {
        Ok(())
    }
}

/// Map keys must be strings (or numbers, written in decimal).
struct KeySerializer;

fn bad_key() -> FormError {
    FormError::Unsupported {
        what: "a non-string map key",
        field: String::new(),
    }
}

macro_rules! key_display {
    ($($name:ident($t:ty);)*) => {$(
        fn $name(self, v: $t) -> Result<String, FormError> {
            Ok(v.to_string())
        }
    )*};
}

macro_rules! key_unsupported {
    ($($name:ident($($t:ty),*);)*) => {$(
        fn $name(self, $(_: $t),*) -> Result<String, FormError> {
            Err(bad_key())
        }
    )*};
}

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = FormError;
    type SerializeSeq = Impossible<String, FormError>;
    type SerializeTuple = Impossible<String, FormError>;
    type SerializeTupleStruct = Impossible<String, FormError>;
    type SerializeTupleVariant = Impossible<String, FormError>;
    type SerializeMap = Impossible<String, FormError>;
    type SerializeStruct = Impossible<String, FormError>;
    type SerializeStructVariant = Impossible<String, FormError>;

    key_display! {
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_char(char);
        serialize_str(&str);
    }

    key_unsupported! {
        serialize_bool(bool);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, FormError> {
        Ok(variant.to_owned())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<String, FormError> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, FormError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, FormError> {
        Err(bad_key())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, FormError> {
        Err(bad_key())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, FormError> {
        Err(bad_key())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, FormError> {
        Err(bad_key())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, FormError> {
        Err(bad_key())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, FormError> {
        Err(bad_key())
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, FormError> {
        Err(bad_key())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, FormError> {
        Err(bad_key())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;

    #[derive(Serialize)]
    struct Req {
        node: String,
        #[serde(rename = "type")]
        type_: &'static str,
        autostart: Option<bool>,
        mtu: Option<i64>,
        rate: Option<f64>,
        comments: Option<String>,
        ids: Vec<i64>,
        #[serde(flatten)]
        extra: BTreeMap<String, String>,
    }

    #[test]
    fn pairs_follow_pve_conventions() {
        let req = Req {
            node: "pve1".into(),
            type_: "bridge",
            autostart: Some(true),
            mtu: None,
            rate: Some(1.5),
            comments: Some(String::new()),
            ids: vec![1, 2],
            extra: BTreeMap::from([("net0".to_owned(), "virtio".to_owned())]),
        };
        let pairs = to_pairs(&req).expect("encodes");
        let want: Vec<(String, String)> = [
            ("node", "pve1"),
            ("type", "bridge"),
            ("autostart", "1"),
            ("rate", "1.5"),
            ("comments", ""),
            ("ids", "1"),
            ("ids", "2"),
            ("net0", "virtio"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn path_params_are_removed_and_percent_encoded() {
        let mut params = vec![
            ("node".to_owned(), "pve1".to_owned()),
            ("volume".to_owned(), "local:iso/a b/c.iso".to_owned()),
            ("x".to_owned(), "1".to_owned()),
        ];
        let rest = [PathParam {
            name: "volume",
            rest: true,
            format: None,
        }];
        let path = render_path(
            "/nodes/{node}/storage/local/content/{volume}",
            &rest,
            &mut params,
        )
        .expect("renders");
        assert_eq!(
            path,
            "/nodes/pve1/storage/local/content/local:iso%2Fa%20b%2Fc.iso"
        );
        assert_eq!(params, vec![("x".to_owned(), "1".to_owned())]);
    }

    #[test]
    fn missing_and_refused_path_params_are_errors_naming_the_parameter() {
        let mut params = vec![("node".to_owned(), String::new())];
        let e = render_path("/nodes/{node}", &[], &mut params).expect_err("empty");
        assert_eq!(
            e.to_string(),
            "path parameter `node` = \"\" is empty: PVE would drop the segment"
        );
        assert_eq!(
            render_path("/nodes/{node}", &[], &mut Vec::new()),
            Err(FormError::MissingPathParam("node".into()))
        );
        let mut params = vec![
            ("node".to_owned(), "pve1".to_owned()),
            ("snapname".to_owned(), "..".to_owned()),
        ];
        let e = render_path("/nodes/{node}/snapshot/{snapname}", &[], &mut params)
            .expect_err("dot-dot");
        assert_eq!(
            e.to_string(),
            "path parameter `snapname` = \"..\" is a `.` or `..` segment: the request would reach another endpoint"
        );
        let long = "x/".repeat(100);
        let mut params = vec![("iface".to_owned(), long)];
        let e = render_path("/{iface}", &[], &mut params).expect_err("slash");
        let text = e.to_string();
        assert!(text.ends_with("\"... holds a `/`, which PVE splits the path on: the request would reach another endpoint"), "{text}");
        assert!(text.len() < 200, "{text}");
    }

    #[test]
    fn nan_is_refused() {
        #[derive(Serialize)]
        struct R {
            rate: f64,
        }
        assert_eq!(
            to_pairs(&R { rate: f64::NAN }),
            Err(FormError::NotFinite("rate".into()))
        );
    }
}
