//! cel-go's `string.format` validator (ext/formatting.go, the strings
//! extension at version 2, as kube-apiserver v1.36 configures it): a call
//! on a literal format string with a list literal argument is parsed once
//! the expression is type-checked, and each clause is matched against the
//! CHECKED type of its argument, literal or not. Only the first problem of
//! a call is reported; several calls give several errors, and the checker
//! reports the first by position.

use super::super::ast::{Expr, ExprKind, Literal, Pos};
use super::super::functions::strings::clause;
use super::super::types::Ty;

/// A call the validator looks at: where cel-go places it (its
/// parenthesis), the format string and the list literal's elements.
pub(super) struct FormatCall<'e> {
    pub pos: Pos,
    pub text: &'e str,
    pub args: &'e [Expr],
}

/// `'...'.format([...])`: a member call on a string literal with one list
/// literal argument (cel-go's `matchConstantFormatStringWithListLiteralArgs`),
/// as its format string and the list's elements.
pub(super) fn candidate<'e>(
    name: &str,
    target: Option<&'e Expr>,
    args: &'e [Expr],
) -> Option<(&'e str, &'e [Expr])> {
    let (Some(target), [list]) = (target, args) else {
        return None;
    };
    match (&target.kind, &list.kind) {
        (ExprKind::Literal(Literal::String(text)), ExprKind::List { elements, .. })
            if name == "format" =>
        {
            Some((text, elements))
        }
        _ => None,
    }
}

/// What the validator needs from the checker.
pub(super) trait Types {
    /// The final type of `e` (type parameters as `dyn`); `None` when the
    /// checker did not see it.
    fn type_of(&self, e: &Expr) -> Option<Ty>;
    /// Where cel-go places `e` in its messages.
    fn pos_of(&self, e: &Expr) -> Pos;
}

/// cel-go's `parseFormatString` with its `stringFormatChecker`: the first
/// error of `call`, if any.
pub(super) fn validate(call: &FormatCall, types: &dyn Types) -> Option<(Pos, String)> {
    let b = call.text.as_bytes();
    let (mut i, mut requested) = (0, 0);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        // cel-go counts the argument before it reads the clause.
        let index = requested;
        requested += 1;
        if i + 1 >= b.len() {
            return Some((call.pos, "unexpected end of string".into()));
        }
        let Some(arg) = call.args.get(index) else {
            return Some((call.pos, format!("index {index} out of range")));
        };
        let (read, verb) = match clause(&b[i + 1..]) {
            Ok(c) => (c.read, c.verb),
            Err(msg) => {
                let msg = format!("could not parse formatting clause: {msg}");
                return Some((call.pos, msg));
            }
        };
        if let Err((at, msg)) = fits(verb, arg, types) {
            return Some((types.pos_of(at), format!("error during formatting: {msg}")));
        }
        i += 1 + read;
    }
    (call.args.len() > requested).then(|| {
        let given = call.args.len();
        let msg = format!(
            "too many arguments supplied to string.format (expected {requested}, got {given})"
        );
        (call.pos, msg)
    })
}

/// Whether the clause `verb` takes `arg`; else the expression to blame and
/// cel-go's message.
fn fits<'e>(verb: u8, arg: &'e Expr, types: &dyn Types) -> Result<(), (&'e Expr, String)> {
    if verb == b's' {
        return fits_string(arg, types);
    }
    let Some(t) = types.type_of(arg) else {
        return Ok(());
    };
    let (allowed, what): (&[Ty], &str) = match verb {
        b'd' => (
            &[Ty::Int, Ty::Uint],
            "decimal clause can only be used on integers",
        ),
        b'o' => (
            &[Ty::Int, Ty::Uint],
            "octal clause can only be used on integers",
        ),
        b'f' => (
            &[Ty::Double, Ty::String],
            "fixed-point clause can only be used on doubles",
        ),
        b'e' => (
            &[Ty::Double, Ty::String],
            "scientific clause can only be used on doubles",
        ),
        b'b' => (
            &[Ty::Int, Ty::Uint, Ty::Bool],
            "only integers and bools can be formatted as binary",
        ),
        _ => (
            &[Ty::Int, Ty::Uint, Ty::String, Ty::Bytes],
            "only integers, byte buffers, and strings can be formatted as hex",
        ),
    };
    if passes(&t) || allowed.contains(&t) {
        return Ok(());
    }
    Err((arg, format!("{what}, was given {}", type_name(&t))))
}

/// cel-go's `verifyString`: the argument's kind, then each element of a
/// list or map literal, keys before values.
fn fits_string<'e>(e: &'e Expr, types: &dyn Types) -> Result<(), (&'e Expr, String)> {
    if let Some(t) = types.type_of(e) {
        let printable = matches!(
            t,
            Ty::List(_)
                | Ty::Map(..)
                | Ty::Int
                | Ty::Uint
                | Ty::Double
                | Ty::Bool
                | Ty::String
                | Ty::Timestamp
                | Ty::Bytes
                | Ty::Duration
                | Ty::Type(_)
                | Ty::Null
        );
        if !printable && !passes(&t) {
            let msg = format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, \
                 lists, types, durations, and timestamps, was given {}",
                type_name(&t)
            );
            return Err((e, msg));
        }
    }
    match &e.kind {
        ExprKind::List { elements, .. } => elements.iter().try_for_each(|x| fits_string(x, types)),
        ExprKind::Map { entries } => entries.iter().try_for_each(|en| {
            fits_string(&en.key, types)?;
            fits_string(&en.value, types)
        }),
        _ => Ok(()),
    }
}

/// `dyn` passes every clause; so does a type the checker does not know
/// (Interlock's own functions).
fn passes(t: &Ty) -> bool {
    matches!(t, Ty::Dyn | Ty::Error | Ty::Param(_))
}

/// cel-go's `Type.TypeName()`: the name without type parameters.
fn type_name(t: &Ty) -> String {
    match t {
        Ty::Null => "null_type".into(),
        Ty::Duration => "google.protobuf.Duration".into(),
        Ty::Timestamp => "google.protobuf.Timestamp".into(),
        Ty::List(_) => "list".into(),
        Ty::Map(..) => "map".into(),
        Ty::Type(_) => "type".into(),
        Ty::Optional(_) => "optional_type".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
