//! Reading policy files: a policy folder may hold its test cases
//! (`NAME/tests/*.yaml`, as the bundled library does), which are not
//! policies.

use crate::manifest::{self, Document, LoadOptions, Loaded};
use std::collections::HashSet;
use std::path::PathBuf;

/// The name of the folders of test cases inside a policy folder.
pub const TESTS_DIR: &str = "tests";

/// The policy documents of `paths`, or of the bundled library when none.
/// A folder walk leaves out `tests/` folders and files whose first
/// document is a PolicyTest; a file given by name is always read.
pub fn load_documents(paths: &[PathBuf]) -> Loaded {
    if paths.is_empty() {
        return crate::bundled::documents();
    }
    let opts = LoadOptions {
        skip_found_dirs: vec![TESTS_DIR.to_string()],
        ..LoadOptions::default()
    };
    let mut loaded = manifest::load_paths(paths, &opts);
    drop_test_cases(&mut loaded.documents, paths);
    loaded
}

fn is_policy_test(d: &Document) -> bool {
    d.value.get("kind").and_then(|k| k.as_str()) == Some("PolicyTest")
}

/// Drops every document of a found file that starts with a PolicyTest.
fn drop_test_cases(docs: &mut Vec<Document>, named: &[PathBuf]) {
    let named: HashSet<String> = named.iter().map(|p| p.display().to_string()).collect();
    let mut seen = HashSet::new();
    let mut cases = HashSet::new();
    for d in docs.iter() {
        let file = d.source.to_string();
        if seen.insert(file.clone()) && is_policy_test(d) && !named.contains(&file) {
            tracing::debug!(file = %file, "skipping a PolicyTest file found among the policies");
            cases.insert(file);
        }
    }
    docs.retain(|d| !cases.contains(&d.source.to_string()));
}
