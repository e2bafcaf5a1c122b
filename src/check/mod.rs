//! `interlock check`: offline checks over manifest files, and their reports.

pub mod report;
