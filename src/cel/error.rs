//! Compile and evaluation errors.

use super::ast::Pos;
use std::fmt;
use std::sync::Arc;

/// An error found before evaluation: syntax, undeclared names, wrong arity,
/// bad literals. Formats like cel-go: `ERROR: <input>:1:7: message` plus the
/// source line and a caret.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct CompileError {
    pub message: String,
    /// 1-based line and column (in characters) of the offending token.
    pub line: usize,
    pub column: usize,
    /// The source line the error is on, for the caret display.
    pub source_line: String,
    /// Found while planning the program (a constant conversion that
    /// fails), where cel-go gives no position.
    pub planning: bool,
}

impl CompileError {
    pub fn new(src: &str, pos: Pos, message: impl Into<String>) -> Self {
        let pos = (pos as usize).min(src.len());
        let before = &src[..floor_char_boundary(src, pos)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let source_line = src[line_start..].lines().next().unwrap_or("").to_string();
        CompileError {
            message: message.into(),
            line,
            column,
            source_line,
            planning: false,
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.planning {
            return write!(f, "program instantiation failed: {}", self.message);
        }
        let caret: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { '.' })
            .collect();
        write!(
            f,
            "ERROR: <input>:{}:{}: {}\n | {}\n | {}^",
            self.line, self.column, self.message, self.source_line, caret
        )
    }
}

/// An error during evaluation. Cheap to clone: errors are values inside
/// comprehensions and `&&`/`||` absorb them.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(Arc<str>);

impl EvalError {
    pub fn new(msg: impl Into<Arc<str>>) -> Self {
        EvalError(msg.into())
    }
    pub fn message(&self) -> &str {
        &self.0
    }
    /// A function or operator applied to values it has no overload for,
    /// where cel-go says only `no such overload` (a value's own method
    /// refused the other operand, or a function that checks its arguments
    /// itself); the argument is kept for the call sites' readability. Most
    /// library functions name themselves and the argument types instead
    /// (`functions::no_overload`).
    pub fn no_overload(_function: &str) -> Self {
        EvalError::new("no such overload")
    }
    /// A failed conversion (`int('two')`, `duration('forever')`), in
    /// cel-go's words.
    pub fn conversion(from: &str, to: &str) -> Self {
        EvalError::new(format!("type conversion error from '{from}' to '{to}'"))
    }
    /// A `variables.NAME` whose expression failed, as kube-apiserver wraps it.
    pub fn in_variable(name: &str, e: &EvalError) -> Self {
        EvalError::new(format!(
            "composited variable \"{name}\" fails to evaluate: {e}"
        ))
    }
    pub fn no_such_key(key: impl fmt::Display) -> Self {
        EvalError::new(format!("no such key: {key}"))
    }
    /// Integer arithmetic or conversion out of int64 range (cel-go's words).
    pub fn overflow() -> Self {
        EvalError::new("integer overflow")
    }
    pub fn uint_overflow() -> Self {
        EvalError::new("unsigned integer overflow")
    }
    pub fn duration_overflow() -> Self {
        EvalError::new("duration overflow")
    }
    pub fn timestamp_overflow() -> Self {
        EvalError::new("timestamp overflow")
    }
    pub fn division_by_zero() -> Self {
        EvalError::new("division by zero")
    }
    pub fn modulus_by_zero() -> Self {
        EvalError::new("modulus by zero")
    }
    pub fn cost_exceeded() -> Self {
        EvalError::new("operation cancelled: actual cost limit exceeded")
    }
    /// An evaluation stopped from outside (the request's deadline passed),
    /// in cel-go's words for an interrupted evaluation.
    pub fn interrupted() -> Self {
        EvalError::new("operation interrupted")
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

pub type EvalResult<T> = Result<T, EvalError>;
