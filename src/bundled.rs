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
mod tests {
    #[test]
    fn export_writes_the_library_once_and_never_over_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = super::export(dir.path()).expect("exported");
        assert_eq!(files.len(), super::BUNDLED.len());
        let (name, text) = super::BUNDLED[0];
        let written = std::fs::read_to_string(dir.path().join(name).join("policy.yaml")).unwrap();
        assert_eq!(written, text);
        let again = super::export(dir.path()).unwrap_err();
        assert!(
            again
                .to_string()
                .contains("exists; export writes into a new or empty folder"),
            "{again}"
        );
    }
}
