//! `named_enum!`: string-backed enums with storage names and wire numbers.

/// Defines a string-backed status enum with its storage names and wire numbers.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The storage / message string.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(text: &str) -> Option<$name> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }

            /// The wire enum number.
            pub fn to_wire(self) -> i32 {
                match self { $($name::$variant => $wire),+ }
            }

            /// From the wire enum number; 0 and unrecognised numbers give `None`.
            pub fn from_wire(value: i32) -> Option<$name> {
                match value { $($wire => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(concat!("unknown ", stringify!($name), " {:?}"), text))
                })
            }
        }
    };
}
