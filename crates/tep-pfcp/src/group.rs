//! Declares a sequence of IEs decoded in one walk: a grouped IE (with its
//! [`crate::ie::Value`] impl) or a message body. Each field is `req`
//! (mandatory: `Mandatory IE missing` naming it when absent), `some`
//! (mandatory, one or more), `one` (optional) or `many` (any number). A
//! repeated single IE keeps its first occurrence; unknown IEs are skipped.

macro_rules! ies {
    (
        $(#[$m:meta])*
        pub struct $name:ident = $ty:ident {
            $($(#[$fm:meta])* $kind:ident $field:ident: $fty:ty,)*
        }
    ) => {
        ies!(@struct $(#[$m])* $name { $($(#[$fm])* $kind $field: $fty,)* });

        impl $crate::ie::Value for $name {
            const TYPE: $crate::ie::IeType = $crate::ie::IeType::$ty;
            fn parse(r: &mut $crate::ie::Reader<'_>) -> Result<Self, $crate::ie::IeError> {
                Self::parse_ies(r.rest(), $crate::ie::IeType::$ty)
            }
            fn emit(&self, w: &mut $crate::ie::Writer<'_>) {
                self.emit_ies(w)
            }
        }
    };
    (
        $(#[$m:meta])*
        pub message $name:ident {
            $($(#[$fm:meta])* $kind:ident $field:ident: $fty:ty,)*
        }
    ) => {
        ies!(@struct $(#[$m])* $name { $($(#[$fm])* $kind $field: $fty,)* });
    };
    (@struct $(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $kind:ident $field:ident: $fty:ty,)* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Default)]
        pub struct $name {
            $($(#[$fm])* pub $field: ies!(@ty $kind $fty),)*
        }

        impl $name {
            /// Decodes the IEs of `data` (`parent` names the container in
            /// an Invalid length error).
            #[allow(unused_mut, unused_variables)]
            pub fn parse_ies(data: &[u8], parent: $crate::ie::IeType) -> Result<Self, $crate::ie::IeError> {
                $(let mut $field: ies!(@slot $kind $fty) = Default::default();)*
                $crate::ie::walk(data, parent, |t, v| {
                    $(if t == <$fty as $crate::ie::Value>::TYPE {
                        return ies!(@take $kind $field, $fty, v);
                    })*
                    Ok(())
                })?;
                Ok($name {
                    $($field: ies!(@finish $kind $field, $fty),)*
                })
            }

            /// Writes the IEs, in declaration order.
            #[allow(unused_variables)]
            pub fn emit_ies(&self, w: &mut $crate::ie::Writer<'_>) {
                $(ies!(@emit $kind w, &self.$field);)*
            }
        }
    };
    (@ty req $t:ty) => { $t };
    (@ty some $t:ty) => { Vec<$t> };
    (@ty one $t:ty) => { Option<$t> };
    (@ty many $t:ty) => { Vec<$t> };
    (@slot req $t:ty) => { Option<$t> };
    (@slot some $t:ty) => { Vec<$t> };
    (@slot one $t:ty) => { Option<$t> };
    (@slot many $t:ty) => { Vec<$t> };
    (@take req $f:ident, $t:ty, $v:ident) => { $crate::ie::first(&mut $f, $v) };
    (@take one $f:ident, $t:ty, $v:ident) => { $crate::ie::first(&mut $f, $v) };
    (@take some $f:ident, $t:ty, $v:ident) => { <$t as $crate::ie::Value>::from_ie($v).map(|x| $f.push(x)) };
    (@take many $f:ident, $t:ty, $v:ident) => { <$t as $crate::ie::Value>::from_ie($v).map(|x| $f.push(x)) };
    (@finish req $f:ident, $t:ty) => { $crate::ie::need($f)? };
    (@finish one $f:ident, $t:ty) => { $f };
    (@finish many $f:ident, $t:ty) => { $f };
    (@finish some $f:ident, $t:ty) => {
        if $f.is_empty() {
            return Err($crate::ie::IeError::missing(<$t as $crate::ie::Value>::TYPE));
        } else {
            $f
        }
    };
    (@emit req $w:ident, $v:expr) => { $w.ie($v) };
    (@emit one $w:ident, $v:expr) => { $w.opt($v) };
    (@emit some $w:ident, $v:expr) => { $w.all($v) };
    (@emit many $w:ident, $v:expr) => { $w.all($v) };
}
