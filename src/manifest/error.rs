//! Errors of the manifest loader: each names the input, the line (and column
//! where known) and what to do about it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// Standard input (`-` on the command line), shown as `<stdin>`.
    Stdin,
    /// A file, as the user named it or as found under a directory they named.
    File(Arc<Path>),
}

impl Source {
    /// A source for a file path.
    pub fn file(path: impl AsRef<Path>) -> Source {
        Source::File(Arc::from(path.as_ref()))
    }

    /// The file path, or `None` for standard input.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::Stdin => None,
            Source::File(p) => Some(p),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Stdin => f.write_str("<stdin>"),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A problem with one input file or document. Loading goes on past it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    /// The file (or standard input).
    pub source: Source,
    /// 1-based line, when the problem is inside the file.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub kind: LoadErrorKind,
}

impl LoadError {
    pub(crate) fn new(source: Source, line: Option<usize>, kind: LoadErrorKind) -> Self {
        LoadError {
            source,
            line,
            column: None,
            kind,
        }
    }

    /// The reason alone, without the location.
    pub fn message(&self) -> String {
        self.kind.to_string()
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

impl fmt::Display for LoadError {
    /// `file:line:column: reason`, leaving out what is not known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}", self.kind)
    }
}

/// What went wrong while loading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadErrorKind {
    /// The file or directory could not be read.
    #[error("cannot read: {0}")]
    Io(String),
    /// A file read whole (JSON, UTF-16, a render's output) is larger than
    /// the configured limit.
    #[error("file is larger than the limit of {limit} bytes; split it or raise the limit")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// One document of a YAML stream (from its first line to the next
    /// `---` or `...`) is larger than the configured limit; the rest of
    /// the stream is read.
    #[error("document is larger than the limit of {limit} bytes (from this line to the next --- line); split it or raise the limit")]
    DocumentTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("file is not valid UTF-8 (first bad byte at offset {offset}); save it as UTF-8")]
    NotUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// A YAML or JSON syntax error, in the parser's words.
    #[error("{0}")]
    Syntax(String),
    /// The same key twice in one mapping.
    #[error("duplicate key \"{key}\" (first defined at line {first_line}); remove one of them")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Line of the first occurrence.
        first_line: usize,
    },
    /// Nesting deeper than the limit.
    #[error("nesting is deeper than the limit of {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Aliases expand to too many nodes.
    #[error(
        "anchors and aliases copy more than {limit} nodes; this looks like a \"billion laughs\" document"
    )]
    AliasLimit {
        /// The limit.
        limit: usize,
    },
    /// An alias that refers to a node containing it.
    #[error("alias refers to a node that contains it; recursive structures cannot be represented")]
    RecursiveAlias,
    /// A scalar that JSON cannot hold, or a tag that does not fit its text.
    #[error("{0}")]
    Scalar(String),
    /// A mapping key that cannot be a JSON object key.
    #[error("mapping key is {0}; keys must be strings, numbers or booleans")]
    BadKey(&'static str),
    /// A `<<` merge whose value is not a mapping or a list of mappings.
    #[error("merge key \"<<\" needs a mapping or a list of mappings")]
    BadMerge,
    /// A document that is not a mapping.
    #[error("document is {found}, not a mapping; every Kubernetes object is a mapping with apiVersion and kind")]
    NotAMapping {
        /// What it is instead ("a list", "a string", ...).
        found: &'static str,
    },
    /// A document without `apiVersion` or `kind`.
    #[error("document has no \"{field}\"; every Kubernetes object needs apiVersion and kind")]
    MissingTypeField {
        /// `apiVersion` or `kind`.
        field: &'static str,
    },
    /// A field of the wrong type.
    #[error("\"{field}\" must be {expected}, found {found}")]
    BadField {
        /// Path of the field, e.g. `metadata.name`.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// A document without a name.
    #[error("document has no metadata.name (nor metadata.generateName); every Kubernetes object needs a name")]
    MissingName,
    /// The same object twice in the inputs.
    #[error("duplicate object {object}; first defined at {first}")]
    DuplicateObject {
        /// `kind namespace/name`.
        object: String,
        /// `file:line` of the first one.
        first: String,
    },
    /// The YAML parser failed unexpectedly on this document.
    #[error("the YAML parser failed on this document; check its syntax")]
    ParserFailure,
}
