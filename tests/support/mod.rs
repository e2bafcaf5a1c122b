//! Shared support for integration tests: `mod support;` in a test file.
//!
//! Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

pub mod cluster;

pub mod controller;

pub mod webhook;
