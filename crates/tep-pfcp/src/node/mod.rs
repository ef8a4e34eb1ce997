//! The UP function's PFCP node.
