//! One macro, [`named_enum!`], shared by the crates that count things by
//! name: tep-dataplane (nodes, drop reasons), tep-pfcp (its node's
//! counters) and the daemon (I/O events). It lives in a crate of its own
//! because tep-pfcp depends on nothing else of tep's, and must not.

/// Declares an enum whose variants are counters with stable names, once:
/// the variants in counter order, with `ALL`, `COUNT` (the size of a
/// counter array indexed by the value), `name()` (the stable snake-case or
/// kebab-case name: a metric label, a JSON key, a `show runtime` row) and
/// `Display` by that name. VPP's node error strings have the same shape.
///
/// ```
/// tep_named::named_enum! {
///     /// Colours, counted.
///     pub enum Colour {
///         /// Red.
///         Red => "red",
///         /// Dark blue.
///         DarkBlue => "dark_blue",
///     }
/// }
/// assert_eq!(Colour::COUNT, 2);
/// assert_eq!(Colour::ALL[1].name(), "dark_blue");
/// assert_eq!(Colour::Red.to_string(), "red");
/// assert_eq!(Colour::DarkBlue as usize, 1);
/// ```
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident {
            $($(#[$doc:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $enum {
            $($(#[$doc])* $variant,)+
        }

        impl $enum {
            /// Every value, in counter order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant,)+];
            /// How many there are (the size of a counter array).
            pub const COUNT: usize = $enum::ALL.len();

            /// The stable name (metric label, JSON key, report row).
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $text,)+
                }
            }
        }

        impl ::core::fmt::Display for $enum {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
