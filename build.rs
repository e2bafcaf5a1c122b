//! Bundles the policy library (policies/*/policy.yaml) into the binary.

use std::fs;
use std::path::Path;

fn main() {
    // Read at run time, not compile time (`env!`): a build script binary
    // shared through one target directory by two checkouts must bundle the
    // library of the checkout it runs for.
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("policies");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut entries = Vec::new();
    if let Ok(dirs) = fs::read_dir(&root) {
        for d in dirs.flatten() {
            let policy = d.path().join("policy.yaml");
            if policy.is_file() {
                println!("cargo:rerun-if-changed={}", policy.display());
                let name = d.file_name().to_string_lossy().to_string();
                entries.push((name, policy));
            }
        }
    }
    // An empty library would build a binary whose checks find nothing.
    assert!(
        !entries.is_empty(),
        "no policies/*/policy.yaml under {}: the bundled library is missing",
        root.display()
    );
    entries.sort();
    let mut out = String::from("/// (policy folder, file contents) of the bundled library.\npub const BUNDLED: &[(&str, &str)] = &[\n");
    for (name, path) in entries {
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("bundled.rs");
    fs::write(dest, out).expect("write bundled.rs");
}
