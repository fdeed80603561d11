//! Open enums: the values a schema lists, plus `Other(String)` for values a newer PVE adds.

/// Defines an open enum with `FromStr` (never fails), `Display`, `Serialize`, `Deserialize`
/// (both as the wire string) and [`crate::propstr::PropValue`].
///
/// ```
/// pve_sdk::open_enum! {
///     /// The state of a guest.
///     pub enum Status { Running = "running", Stopped = "stopped" }
/// }
/// let s: Status = "paused".parse().unwrap_or(Status::Stopped);
/// assert_eq!(s, Status::Other("paused".into()));
/// assert_eq!(Status::Running.to_string(), "running");
/// ```
#[macro_export]
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this version of the schema does not list.
            Other(String),
        }

        impl $name {
            /// Every value the schema lists, in the schema's order.
            pub const VALUES: &'static [&'static str] = &[$($wire),*];

            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )*
                    Self::Other(s) => s,
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, ::std::convert::Infallible> {
                Ok(match s {
                    $( $wire => Self::$variant, )*
                    other => Self::Other(other.to_owned()),
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = $crate::open_enum::deserialize_text(d)?;
                Ok(match s.parse() {
                    Ok(v) => v,
                    Err(never) => match never {},
                })
            }
        }

        impl $crate::propstr::PropValue for $name {
            fn parse_prop(text: &str) -> Result<Self, String> {
                match text.parse() {
                    Ok(v) => Ok(v),
                    Err(never) => match never {},
                }
            }
            fn print_prop(&self) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(self.as_str())
            }
        }
    };
}

/// Reads an enum's wire text (a string; numbers are accepted as their decimal text).
///
/// # Errors
///
/// The deserializer's error when the value is neither a string nor a number.
pub fn deserialize_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_string(V)
}

#[cfg(test)]
mod tests {
    crate::open_enum! {
        enum Mode { ActiveBackup = "active-backup", Lacp = "802.3ad" }
    }

    #[test]
    fn known_and_unknown_values_round_trip() {
        for text in ["active-backup", "802.3ad", "balance-future"] {
            let m: Mode = serde_json::from_value(serde_json::json!(text)).expect("decodes");
            assert_eq!(serde_json::to_value(&m).expect("encodes"), serde_json::json!(text));
            assert_eq!(m.to_string(), text);
        }
        assert_eq!("802.3ad".parse::<Mode>(), Ok(Mode::Lacp));
        assert_eq!(Mode::VALUES, &["active-backup", "802.3ad"]);
    }
}
