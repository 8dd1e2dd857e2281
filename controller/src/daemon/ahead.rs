//! Nodes ahead of the log live in [`logtools::ahead`]: part of the
//! snapshot's annex ([`super::annex`]), kept up to date by the core.

pub use logtools::ahead::*;
