//! The aggregate object, `ResourceGroup`: a group of members validated as
//! one unit. This module is what admission and the controller share about
//! a group: how its members are validated against the policies over "the
//! inventory with this group's members replaced by the desired ones". It
//! talks to no cluster; the controller (`crate::controller`) executes.

pub mod validate;
