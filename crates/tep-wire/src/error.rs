use core::fmt;

/// Why bytes are not a valid header. Each variant is a distinct drop reason
/// for the dataplane and a distinct message for `tep decode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the header (or what a length field announces).
    Truncated,
    /// A length field contradicts the header layout or the buffer (e.g. an
    /// IPv4 IHL below 5, a UDP length below 8, a GTP-U extension length of 0).
    BadLength,
    /// A version field holds a version this library does not parse.
    BadVersion,
    /// A field holds a value the format forbids (reserved bits or flags set
    /// where the spec says they must be zero, an impossible combination).
    Malformed,
    /// A valid header that uses a feature this library does not implement
    /// (an unknown GUE flag, a GTP-U comprehension-required extension).
    Unsupported,
}

impl Error {
    /// A stable short name (counter labels, JSON).
    pub const fn name(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadLength => "bad_length",
            Error::BadVersion => "bad_version",
            Error::Malformed => "malformed",
            Error::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated",
            Error::BadLength => "inconsistent length field",
            Error::BadVersion => "unsupported version",
            Error::Malformed => "malformed header",
            Error::Unsupported => "unsupported feature",
        })
    }
}

impl std::error::Error for Error {}

/// The result of parsing.
pub type Result<T> = core::result::Result<T, Error>;
