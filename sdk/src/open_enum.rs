//! Open enums: the values a schema lists, plus `Other(String)` for values a newer PVE adds.
//!
//! Generated enums are plain `#[non_exhaustive]` enums with an [`OpenEnum`] impl (two `match`
//! functions); [`crate::open_enum_traits!`] derives `FromStr` (never fails), `Display`,
//! `Serialize`, `Deserialize` (both as the wire string) and [`crate::propstr::PropValue`] from
//! it. [`crate::open_enum!`] does all of that for hand-written enums.

/// An enum of wire strings with an `Other(String)` arm.
pub trait OpenEnum: Sized {
    /// Every value the schema lists, in the schema's order.
    const VALUES: &'static [&'static str];

    /// The variant of a wire value; `Other` for values the schema does not list.
    fn from_wire(text: &str) -> Self;

    /// The wire value.
    fn as_str(&self) -> &str;
}

/// Implements `FromStr`, `Display`, `Serialize`, `Deserialize` and `PropValue` for an
/// [`OpenEnum`].
#[macro_export]
#[doc(hidden)]
macro_rules! open_enum_traits {
    ($name:ident) => {
        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, ::std::convert::Infallible> {
                Ok(<Self as $crate::open_enum::OpenEnum>::from_wire(s))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::open_enum::OpenEnum::as_str(self))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($crate::open_enum::OpenEnum::as_str(self))
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::open_enum::deserialize(d)
            }
        }

        impl $crate::propstr::PropValue for $name {
            fn parse_prop(text: &str) -> Result<Self, String> {
                Ok(<Self as $crate::open_enum::OpenEnum>::from_wire(text))
            }
            fn print_prop(&self) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($crate::open_enum::OpenEnum::as_str(self))
            }
        }
    };
}

/// Defines an open enum with its [`OpenEnum`] impl and the traits of [`crate::open_enum_traits!`].
///
/// ```
/// use pve_sdk::open_enum::OpenEnum;
///
/// pve_sdk::open_enum! {
///     /// The state of a guest.
///     pub enum Status { Running = "running", Stopped = "stopped" }
/// }
/// let s: Status = "paused".parse().unwrap_or(Status::Stopped);
/// assert_eq!(s, Status::Other("paused".into()));
/// assert_eq!(Status::Running.to_string(), "running");
/// assert_eq!(Status::VALUES, &["running", "stopped"]);
/// ```
#[macro_export]
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this version of the schema does not list.
            Other(String),
        }

        impl $crate::open_enum::OpenEnum for $name {
            const VALUES: &'static [&'static str] = &[$($wire),*];
            fn from_wire(text: &str) -> Self {
                match text {
                    $( $wire => Self::$variant, )*
                    other => Self::Other(other.to_owned()),
                }
            }
            fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )*
                    Self::Other(s) => s,
                }
            }
        }

        $crate::open_enum_traits!($name);
    };
}

/// Deserializes an open enum from its wire text (a string; numbers are read as their decimal
/// text).
///
/// # Errors
///
/// The deserializer's error when the value is neither a string nor a number.
pub fn deserialize<'de, T: OpenEnum, D: serde::Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    struct V<T>(std::marker::PhantomData<T>);
    impl<T: OpenEnum> serde::de::Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            Ok(T::from_wire(v))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
            Ok(T::from_wire(&v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
            Ok(T::from_wire(&v.to_string()))
        }
    }
    d.deserialize_str(V(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::OpenEnum;

    crate::open_enum! {
        enum Mode { ActiveBackup = "active-backup", Lacp = "802.3ad" }
    }

    #[test]
    fn known_and_unknown_values_round_trip() {
        for text in ["active-backup", "802.3ad", "balance-future"] {
            let m: Mode = serde_json::from_value(serde_json::json!(text)).expect("decodes");
            assert_eq!(
                serde_json::to_value(&m).expect("encodes"),
                serde_json::json!(text)
            );
            assert_eq!(m.to_string(), text);
        }
        assert_eq!("802.3ad".parse::<Mode>(), Ok(Mode::Lacp));
        assert_eq!(Mode::VALUES, &["active-backup", "802.3ad"]);
        let m: Mode =
            crate::lenient::from_value(serde_json::json!(5)).expect("numbers read as text");
        assert_eq!(m, Mode::Other("5".into()));
    }
}
