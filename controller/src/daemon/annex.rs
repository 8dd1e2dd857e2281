//! The daemon's part of a snapshot lives in [`logtools::annex`], with the
//! snapshot frame that carries it: the core rebuilds and writes it, and
//! `log verify --deep` decodes it without linking the daemon.

pub use logtools::annex::*;
