//! Bundles the policy library (policies/*/policy.yaml) into the binary, and
//! stamps the version with the git commit it was built from.

use std::fs;
use std::path::Path;
use std::process::Command;

/// The short commit of the checkout at `dir`: `INTERLOCK_GIT_COMMIT` when
/// set (a build from a tarball can name its commit), else `git rev-parse
/// --short HEAD`, else "unknown" (no git, or not a checkout). Asks cargo to
/// run this again when HEAD or the branch it names moves.
fn git_commit(dir: &Path) -> String {
    println!("cargo:rerun-if-env-changed=INTERLOCK_GIT_COMMIT");
    if let Some(c) = std::env::var("INTERLOCK_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        return c.trim().to_string();
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    // HEAD, the branch it points at, and packed-refs (a worktree keeps HEAD
    // in its own git dir and the branches in the common one).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(r);
    }
    for w in watched {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
            if Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    commit
}

fn main() {
    // Read at run time, not compile time (`env!`): a build script binary
    // shared through one target directory by two checkouts must bundle the
    // library of the checkout it runs for.
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let commit = git_commit(Path::new(&manifest_dir));
    println!("cargo:rustc-env=INTERLOCK_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=INTERLOCK_VERSION={} ({commit})",
        std::env::var("CARGO_PKG_VERSION").expect("CARGO_PKG_VERSION")
    );
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
