//! `interlock check`: offline checks over manifest files, and their reports.

pub mod built_images;
pub mod by_hand;
mod json_at;
pub mod policy_test;
pub mod producers;
pub mod render;
pub mod run;
pub mod stand_in;

pub use crate::report::{
    stdout_wants_color, Action, Evaluated, Finding, InputError, ObjectRef, OutputFormat,
    RelatedObject, Report, SourceLocation,
};
pub use run::{check_documents, check_documents_with, run, CheckOptions, DEFAULT_USER};
