//! The proof crate's verdicts and the handover report, under the name the
//! runtime's callers used.

pub use ::proof::*;
pub use api::report::*;
