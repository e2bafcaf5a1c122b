use super::*;
use crate::manifest::{load_bytes, load_paths, Document, Format, PathSegment};

/// A reader that hands out a few bytes at a time, so that lines,
/// markers and characters are cut at every place a window can cut them.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.1 = self.1 % 7 + 1;
        let n = self.1.min(out.len()).min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn object(name: &str, extra: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\ndata:\n  k: v\n{extra}")
}

/// Every kind of piece a stream holds: comments between documents,
/// `...`, a directive, a list, a syntax error, a duplicate key, a
/// document with no name, a non-ASCII scalar, a long line.
fn stream_text() -> String {
    let mut t = String::from("\u{feff}# leading\n");
    for i in 0..40 {
        t.push_str("---\n");
        t.push_str(&match i % 8 {
            0 => object(&format!("o{i}"), "  long: ") + &"x".repeat(300) + "\n",
            1 => format!("# only a comment {i}\n"),
            2 => object(&format!("o{i}"), "...\n%YAML 1.2\n"),
            3 => format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}\n",
                object(&format!("l{i}"), "")
                    .trim_end()
                    .replace('\n', "\n  ")
            ),
            4 => object(&format!("o{i}"), "  bad: [1, 2\n"),
            5 => object(&format!("o{i}"), "  k: twice\n"),
            6 => "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n".to_string(),
            _ => object(&format!("o{i}"), "  text: \"é ü 字 😀\"\n"),
        });
    }
    t
}

fn summary(docs: &[Document]) -> Vec<(usize, String, Option<usize>)> {
    docs.iter()
        .map(|d| {
            let at = [PathSegment::Key("data"), PathSegment::Key("k")];
            (d.line, d.value.to_string(), d.line_of(&at))
        })
        .collect()
}

fn errors(l: &Loaded) -> Vec<(Option<usize>, String)> {
    l.errors
        .iter()
        .map(|e| (e.line, e.kind.to_string()))
        .collect()
}

fn streamed(text: &[u8], opts: &LoadOptions) -> Loaded {
    let mut all = Loaded::default();
    read(
        &Source::Stdin,
        Vec::new(),
        Trickle(text, 0),
        opts,
        &mut |l| all.append(l),
    );
    all
}

#[test]
fn windows_give_the_objects_lines_and_errors_of_a_whole_read() {
    let text = stream_text();
    let opts = LoadOptions {
        reject_duplicate_objects: false,
        ..LoadOptions::default()
    };
    let whole = load_bytes(Source::Stdin, text.as_bytes(), Format::Yaml, &opts);
    assert_eq!((whole.documents.len(), whole.errors.len()), (20, 15));
    for window in [1, 50, 333, 4096] {
        let opts = LoadOptions {
            stream_above: window,
            ..opts.clone()
        };
        let l = streamed(text.as_bytes(), &opts);
        assert_eq!(
            summary(&l.documents),
            summary(&whole.documents),
            "window {window}"
        );
        assert_eq!(errors(&l), errors(&whole), "window {window}");
    }
}

#[test]
fn a_document_over_the_limit_is_refused_at_its_line_and_the_rest_read() {
    let big = object("big", &format!("  long: {}\n", "y".repeat(5000)));
    let text = format!("{}---\n{big}---\n{}", object("a", ""), object("b", ""));
    let opts = LoadOptions {
        stream_above: 64,
        max_document_size: 1000,
        ..LoadOptions::default()
    };
    let l = streamed(text.as_bytes(), &opts);
    let names: Vec<_> = l.documents.iter().map(|d| d.name().unwrap_or("")).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(l.documents[1].line, 18);
    let at = object("a", "").lines().count() + 1;
    assert_eq!(
        errors(&l),
        [(
            Some(at),
            LoadErrorKind::DocumentTooLarge { limit: 1000 }.to_string()
        )]
    );
    // A whole read says the same.
    let whole = load_bytes(Source::Stdin, text.as_bytes(), Format::Yaml, &opts);
    assert_eq!(errors(&whole), errors(&l));
}

#[test]
fn a_line_longer_than_a_window_is_skipped_with_its_document() {
    let huge = format!("  long: {}\n", "z".repeat(2 * WINDOW + 5));
    let text = format!(
        "{}---\n{}---\n{}",
        object("a", ""),
        object("big", &huge),
        object("b", "")
    );
    let opts = LoadOptions {
        stream_above: 64,
        max_document_size: 4096,
        ..LoadOptions::default()
    };
    let l = streamed(text.as_bytes(), &opts);
    let names: Vec<_> = l.documents.iter().map(|d| d.name().unwrap_or("")).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(l.documents[1].line, 18);
    assert_eq!(l.errors.len(), 1);
}

#[test]
fn bad_utf8_costs_its_document_only() {
    let mut text = object("a", "").into_bytes();
    text.extend_from_slice(b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \xff\n---\n");
    text.extend_from_slice(object("b", "").as_bytes());
    let opts = LoadOptions {
        stream_above: 16,
        ..LoadOptions::default()
    };
    let l = streamed(&text, &opts);
    let names: Vec<_> = l.documents.iter().map(|d| d.name().unwrap_or("")).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(l.errors.len(), 1);
    assert_eq!(l.errors[0].line, Some(12));
    assert!(matches!(
        l.errors[0].kind,
        LoadErrorKind::NotUtf8 { offset: 133 }
    ));
}

#[test]
fn a_file_over_the_threshold_is_read_in_windows_as_a_whole_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    std::fs::write(&path, stream_text()).unwrap();
    let whole = load_paths(&[&path], &LoadOptions::default());
    let windows = LoadOptions {
        stream_above: 100,
        ..LoadOptions::default()
    };
    let l = load_paths(&[&path], &windows);
    assert_eq!(summary(&l.documents), summary(&whole.documents));
    assert_eq!(errors(&l), errors(&whole));
    assert!(l.errors.iter().all(|e| e.source == Source::file(&path)));
}
