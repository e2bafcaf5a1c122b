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
