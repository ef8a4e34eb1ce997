//! The enums whose values are counted and shown by name (nodes, drop
//! reasons, the I/O layer's events), each declared once with its names.

/// Declares an enum of named values: the variants in counter order, with
/// `ALL`, `COUNT` (the size of a counter array indexed by the value) and
/// `name()` (the stable snake-case or kebab-case name: a metric label, a
/// JSON key, a `show runtime` row).
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
    };
}
