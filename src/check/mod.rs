//! `interlock check`: offline checks over manifest files, and their reports.

pub mod report;

pub use report::{
    stdout_wants_color, Action, Evaluated, Finding, InputError, ObjectRef, OutputFormat,
    RelatedObject, Report, SourceLocation,
};
