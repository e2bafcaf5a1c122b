//! A YAML input larger than [`LoadOptions::stream_above`] read in windows.
//!
//! Its lines are cut into documents as they arrive, by the same
//! [`Splitter`] a whole read uses (so the pieces, their lines and their
//! objects are the same); once the complete pieces held reach a window,
//! they are parsed in parallel and handed on, and their bytes dropped.
//! What is held is a window, the document being read and one read's
//! worth of bytes, whatever the size of the input. A document over
//! [`LoadOptions::max_document_size`] is refused at its first line without
//! being held whole, and the stream goes on after it.

use std::io::Read;

use rayon::prelude::*;

use super::error::{LoadError, LoadErrorKind, Source};
use super::yaml::{self, Parsed, Splitter};
use super::{LoadOptions, Loaded};

/// The largest window: parsed trees cost about 17 bytes per byte of YAML,
/// and a window's are alive at once.
const WINDOW: usize = 4 * 1024 * 1024;

const BOM: &[u8] = "\u{feff}".as_bytes();

/// A piece of the stream: (start, end, first line), offsets in the input.
type Piece = (usize, usize, usize);

/// Reads `prefix` and then `reader` as one YAML stream, handing each
/// window's objects and errors to `each` in input order.
pub(super) fn read(
    source: &Source,
    prefix: Vec<u8>,
    reader: impl Read,
    opts: &LoadOptions,
    each: &mut dyn FnMut(Loaded),
) {
    let window = usize::try_from(opts.stream_above)
        .unwrap_or(WINDOW)
        .clamp(1, WINDOW);
    let mut s = Stream {
        source,
        opts,
        reader,
        buf: prefix,
        base: 0,
        scan: 0,
        searched: 0,
        eof: false,
        splitter: Splitter::at(0),
        ready: Vec::new(),
        emitted: false,
        refused: None,
        mid_line: false,
    };
    s.fill(BOM.len(), each);
    if s.buf.starts_with(&[0xFF, 0xFE]) || s.buf.starts_with(&[0xFE, 0xFF]) {
        // UTF-16 is decoded whole (`load_one`), within the documents' limit.
        let limit = opts.max_document_size;
        each(error_at(source, None, LoadErrorKind::TooLarge { limit }));
        return;
    }
    if s.buf.starts_with(BOM) {
        s.scan = BOM.len();
        s.splitter = Splitter::at(BOM.len());
    }
    loop {
        s.fill(window, each);
        s.scan_lines(window, each);
        if s.eof {
            let end = s.base + s.buf.len();
            if let Some(p) = s.splitter.finish(end, !s.emitted) {
                s.emit(p);
            }
            s.flush(each);
            return;
        }
        s.drop_consumed();
    }
}

struct Stream<'a, R> {
    source: &'a Source,
    opts: &'a LoadOptions,
    reader: R,
    /// The input's bytes from offset `base` on.
    buf: Vec<u8>,
    base: usize,
    /// The offset of the first line not yet fed to the splitter.
    scan: usize,
    /// How far past `scan` the line there has been searched for its end
    /// (a long line is not searched again from its start at each read).
    searched: usize,
    eof: bool,
    splitter: Splitter,
    /// Complete pieces not yet parsed, in order and contiguous.
    ready: Vec<Piece>,
    /// Whether the splitter has ended any piece.
    emitted: bool,
    /// The start of a piece refused as too large, while it is read.
    refused: Option<usize>,
    /// The next bytes are the rest of a line of the refused piece.
    mid_line: bool,
}

impl<R: Read> Stream<'_, R> {
    /// Reads `want` more bytes, or up to the end (a read error ends the
    /// stream: it is reported at the line reached, after what was read).
    fn fill(&mut self, want: usize, each: &mut dyn FnMut(Loaded)) {
        let target = self.buf.len() + want;
        while !self.eof && self.buf.len() < target {
            let len = self.buf.len();
            self.buf.resize(target, 0);
            let read = self.reader.read(&mut self.buf[len..]);
            self.buf.truncate(len + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.eof = true;
                    let line = Some(self.splitter.line_no);
                    each(error_at(
                        self.source,
                        line,
                        LoadErrorKind::Io(e.to_string()),
                    ));
                }
            }
        }
    }

    /// Feeds every complete line held (and, at the end, the last one) to
    /// the splitter; refuses the piece being read once it is too large.
    /// The pieces are parsed each time they reach `window` bytes.
    fn scan_lines(&mut self, window: usize, each: &mut dyn FnMut(Loaded)) {
        let end = self.base + self.buf.len();
        while self.scan < end {
            let rel = self.scan - self.base;
            let from = self.searched.max(self.scan) - self.base;
            let len = match memchr::memchr(b'\n', &self.buf[from..]) {
                Some(i) => from - rel + i + 1,
                None if self.eof => self.buf.len() - rel,
                None => {
                    self.searched = end;
                    break;
                }
            };
            if std::mem::take(&mut self.mid_line) {
                self.splitter.skip_line();
            } else if let Some(p) = self.splitter.line(self.scan, &self.buf[rel..rel + len]) {
                self.emit(p);
                if self
                    .ready
                    .last()
                    .is_some_and(|l| l.1 - self.ready[0].0 >= window)
                {
                    self.flush(each);
                }
            }
            self.scan += len;
        }
        let reading = end - self.splitter.start;
        if self.refused.is_none() && reading as u64 > self.opts.max_document_size {
            self.flush(each);
            let limit = self.opts.max_document_size;
            let line = Some(self.splitter.start_line);
            each(error_at(
                self.source,
                line,
                LoadErrorKind::DocumentTooLarge { limit },
            ));
            self.refused = Some(self.splitter.start);
        }
        if self.refused.is_some() && end - self.scan > WINDOW {
            // A line of the refused piece too long to hold to its end (a
            // shorter one is kept: it may be the marker that ends it).
            self.scan = end;
            self.mid_line = true;
        }
    }

    fn emit(&mut self, p: Piece) {
        self.emitted = true;
        if self.refused == Some(p.0) {
            self.refused = None;
        } else {
            self.ready.push(p);
        }
    }

    /// Drops the bytes no piece needs any more.
    fn drop_consumed(&mut self) {
        let keep = match (self.ready.first(), self.refused) {
            (Some(p), _) => p.0,
            (None, Some(_)) => self.scan,
            (None, None) => self.splitter.start.min(self.scan),
        };
        self.buf.drain(..keep - self.base);
        self.base = keep;
    }

    /// Parses the ready pieces and hands on their objects.
    fn flush(&mut self, each: &mut dyn FnMut(Loaded)) {
        if self.ready.is_empty() {
            return;
        }
        let ready = std::mem::take(&mut self.ready);
        let (source, base, opts) = (self.source, self.base, self.opts);
        let parsed: Vec<Result<Parsed, LoadError>> = ready
            .par_iter()
            .map(|&(start, end, line)| {
                let bytes = &self.buf[start - base..end - base];
                match std::str::from_utf8(bytes) {
                    Ok(text) => Ok(yaml::parse_piece(text, line, opts)),
                    Err(e) => {
                        let bad = e.valid_up_to();
                        let lines = bytes[..bad].iter().filter(|&&b| b == b'\n').count();
                        let kind = LoadErrorKind::NotUtf8 {
                            offset: start + bad,
                        };
                        Err(LoadError::new(source.clone(), Some(line + lines), kind))
                    }
                }
            })
            .collect();
        let mut all = Parsed::default();
        let mut errors = Vec::new();
        for p in parsed {
            match p {
                Ok(mut p) => {
                    all.docs.append(&mut p.docs);
                    all.errors.append(&mut p.errors);
                }
                Err(e) => errors.push(e),
            }
        }
        let skipped = (opts.skip_non_objects && all.errors.is_empty())
            .then(|| super::drop_configuration(source, &mut all))
            .flatten();
        let mut loaded = super::objects_of(source, all);
        loaded.skipped = skipped;
        loaded.errors.extend(errors);
        loaded.errors.sort_by_key(|e| e.line);
        each(loaded);
    }
}

fn error_at(source: &Source, line: Option<usize>, kind: LoadErrorKind) -> Loaded {
    Loaded {
        errors: vec![LoadError::new(source.clone(), line, kind)],
        ..Loaded::default()
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
