//! Declares an enum whose variants are counters with stable names, once:
//! the counter array, metric labels and reports all come from it (VPP's
//! node error strings; tep-dataplane's `DropReason` has the same shape).

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

            /// The stable name (metric label, report row).
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $text,)+
                }
            }
        }

        impl core::fmt::Display for $enum {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
