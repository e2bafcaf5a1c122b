//! Shared support for the integration tests (tests/integration) and the
//! benchmarks, which compile it on their own and use only part of it.
#![allow(dead_code)]

pub mod admission_engine;
pub mod celgen;
pub mod cluster;
pub mod rng;
pub mod tenant;

pub mod controller;

pub mod webhook;
