//! The controller's snapshot frame and its deep verification live in
//! [`logtools::snapshot`], beside what reads them (`log verify --deep`,
//! the power-cut checks); the driver writes and loads them from there.

pub use logtools::snapshot::*;
