//! Declares a sequence of IEs decoded in one walk: a grouped IE (with its
//! [`crate::ie::Value`] impl) or a message body. Each field is `req`
//! (mandatory: `Mandatory IE missing` naming it when absent), `some`
//! (mandatory, one or more), `one` (optional), `many` (any number) or
//! `rest` (a [`crate::ie::Skipped`]: every other child is noted there, for
//! the node to refuse or, unknown, to discard; without a `rest` field
//! other children are skipped, which only node messages and reports
//! do). A repeated single IE keeps its first occurrence.

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
                // Repeats of a single IE: the first is kept, the rest noted
                // (a rule group refuses, e.g., a second QFI in a PDI).
                let mut repeats = $crate::ie::Skipped::default();
                $crate::ie::walk(data, parent, |t, v| {
                    $(ies!(@arm $kind $field, $fty, t, v, repeats);)*
                    $(ies!(@rest $kind $field, t);)*
                    Ok(())
                })?;
                $(ies!(@repeats $kind $field, repeats);)*
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
    (@arm rest $f:ident, $t:ty, $ie:ident, $v:ident, $rep:ident) => {};
    (@arm $kind:ident $f:ident, $t:ty, $ie:ident, $v:ident, $rep:ident) => {
        if $ie == <$t as $crate::ie::Value>::TYPE {
            if ies!(@full $kind $f) {
                $rep.note($ie);
            }
            return ies!(@take $kind $f, $t, $v);
        }
    };
    (@full req $f:ident) => { $f.is_some() };
    (@full one $f:ident) => { $f.is_some() };
    (@full $kind:ident $f:ident) => { false };
    (@repeats rest $f:ident, $rep:ident) => { $f = $f.and(&$rep) };
    (@repeats $kind:ident $f:ident, $rep:ident) => {};
    (@rest rest $f:ident, $ie:ident) => { $f.note($ie) };
    (@rest $kind:ident $f:ident, $ie:ident) => {};
    (@ty rest $t:ty) => { $t };
    (@slot rest $t:ty) => { $t };
    (@finish rest $f:ident, $t:ty) => { $f };
    (@emit rest $w:ident, $v:expr) => {};
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
