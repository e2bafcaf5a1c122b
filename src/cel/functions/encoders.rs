//! base64 encoders (cel-go ext.Encoders) and jsonpatch.escapeKey.

use super::{no_overload, str_arg, FnDecl, Lib};
use crate::cel::error::{EvalError, EvalResult};
use crate::cel::program::Ctx;
use crate::cel::value::Value;
use base64::Engine;
use std::sync::Arc;

pub const DECLS: &[FnDecl] = &[
    FnDecl::global("base64.encode", 1, Lib::Encoders, encode),
    FnDecl::global("base64.decode", 1, Lib::Encoders, decode),
    FnDecl::global("jsonpatch.escapeKey", 1, Lib::JsonPatch, escape_key),
];

fn encode<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    match &a[0] {
        Value::Bytes(b) => {
            // cel-go charges base64 one unit; only its size is accounted for.
            ctx.alloc(b.len().div_ceil(3).saturating_mul(4))?;
            Ok(Value::string(
                base64::engine::general_purpose::STANDARD.encode(b),
            ))
        }
        _ => no_overload("base64.encode", a),
    }
}

fn decode<'a>(ctx: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("base64.decode", a, 0)?;
    ctx.alloc(s.len())?;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(s)
        .map(|b| Value::Bytes(Arc::from(b)))
        .map_err(|e| EvalError::new(format!("base64.decode: {e}")))
}

/// RFC 6901: `~` becomes `~0` and `/` becomes `~1`.
fn escape_key<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("jsonpatch.escapeKey", a, 0)?;
    Ok(Value::string(s.replace('~', "~0").replace('/', "~1")))
}
