//! The policy library bundled in the binary (`policies/*/policy.yaml`).

use crate::manifest::{self, Format, LoadOptions, Loaded, Source};

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// Every bundled policy document, named `bundled:policies/NAME/policy.yaml`.
pub fn documents() -> Loaded {
    let mut all = Loaded::default();
    for (name, text) in BUNDLED {
        let source = Source::file(format!("bundled:policies/{name}/policy.yaml"));
        let l = manifest::load_str(source, text, Format::Yaml, &LoadOptions::default());
        all.documents.extend(l.documents);
        all.errors.extend(l.errors);
    }
    all
}

/// Why the library could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}: exists; export writes into a new or empty folder, never over an edited policy")]
    Exists(std::path::PathBuf),
    #[error("{0}: {1}")]
    Io(std::path::PathBuf, std::io::Error),
}

/// Writes every bundled policy to `DIR/NAME/policy.yaml` (for editing,
/// then `-p DIR`); returns the files written.
pub fn export(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, ExportError> {
    let files: Vec<_> = BUNDLED
        .iter()
        .map(|(name, text)| (dir.join(name).join("policy.yaml"), text))
        .collect();
    if let Some((f, _)) = files.iter().find(|(f, _)| f.exists()) {
        return Err(ExportError::Exists(f.clone()));
    }
    for (f, text) in &files {
        let parent = f.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|e| ExportError::Io(parent.to_path_buf(), e))?;
        std::fs::write(f, text).map_err(|e| ExportError::Io(f.clone(), e))?;
    }
    Ok(files.into_iter().map(|(f, _)| f).collect())
}

#[cfg(test)]
#[path = "bundled_tests.rs"]
mod tests;
