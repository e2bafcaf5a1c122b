//! Field selection, `has`, indexing and their errors, worded as cel-go's.

use super::*;

/// Whether cel-go finds `key` in a map a comprehension builds: the key,
/// or a number's other spelling (`1` and `1u`).
pub(super) fn has_key(m: &OwnedMap, key: &Key) -> bool {
    m.contains_key(key) || numeric_twin(key).is_some_and(|k| m.contains_key(&k))
}

/// cel-go's refusal of a repeated key in a map a comprehension builds.
pub(super) fn insert_failed(key: &Key) -> EvalError {
    let key = go_value(&key.to_value());
    EvalError::new(format!("insert failed: key {key} already exists"))
}

/// The other spelling of a numeric key (`1` and `1u`), a repeated key
/// under the CEL specification's rules.
pub(super) fn numeric_twin<'a>(k: &Key<'a>) -> Option<Key<'a>> {
    match k {
        Key::Int(i) if *i >= 0 => Some(Key::Uint(*i as u64)),
        Key::Uint(u) if *u <= i64::MAX as u64 => Some(Key::Int(*u as i64)),
        _ => None,
    }
}

/// `v.field`, or `v.?field` when `optional`.
pub fn select<'a>(v: Value<'a>, field: &str, optional: bool) -> EvalResult<Value<'a>> {
    match v {
        Value::Map(m) => match m.get_str(field) {
            Some(x) if optional => Ok(Value::optional(Some(x))),
            Some(x) => Ok(x),
            None if optional => Ok(Value::Optional(None)),
            None => Err(EvalError::no_such_key(field)),
        },
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => match &*inner {
            Value::Map(m) => Ok(Value::optional(m.get_str(field))),
            other => select(other.clone(), field, false),
        },
        other => Err(EvalError::new(format!(
            "no such key: {field} (type '{}' does not support field selection)",
            other.type_name()
        ))),
    }
}

/// `has(v.field)`.
pub fn has(v: &Value, field: &str) -> EvalResult<Value<'static>> {
    match v {
        Value::Map(m) => Ok(Value::Bool(m.get_str(field).is_some())),
        Value::Optional(None) => Ok(Value::Bool(false)),
        Value::Optional(Some(inner)) => has(inner, field),
        other => Err(EvalError::new(format!(
            "invalid type for field selection: {}",
            other.type_name()
        ))),
    }
}

/// The error of an operand of `&&` or `||` that is not a boolean: its own,
/// or `no such overload` for another value. cel-go keeps the first
/// operand's, whatever the second.
pub(super) fn logic_error(v: EvalResult<Value>, op: &str) -> EvalError {
    match v {
        Err(e) => e,
        Ok(_) => EvalError::no_overload(op),
    }
}

/// Whether `v` passes cel-go's guard for an argument declared as `t`
/// (`Type.IsAssignableRuntimeType`): its runtime type's name, and for a
/// list or a map also its first element or entry. Type parameters and
/// `dyn` take anything.
pub(super) fn fits(t: &Ty, v: &Value) -> bool {
    match (t, v) {
        (t, _) if t.takes_anything() => true,
        (Ty::List(e), Value::List(l)) => l.get(0).is_none_or(|x| fits(e, &x)),
        (Ty::Map(k, e), Value::Map(m)) => m.first().is_none_or(|(x, y)| fits(k, &x) && fits(e, &y)),
        (Ty::Named(n), Value::Opaque(o)) => o.type_name() == &**n,
        (Ty::Int, Value::Int(_))
        | (Ty::Uint, Value::Uint(_))
        | (Ty::Double, Value::Double(_))
        | (Ty::Bool, Value::Bool(_))
        | (Ty::String, Value::String(_))
        | (Ty::Bytes, Value::Bytes(_))
        | (Ty::Null, Value::Null)
        | (Ty::Duration, Value::Duration(_))
        | (Ty::Timestamp, Value::Timestamp(_))
        | (Ty::Type(_), Value::Type(_))
        | (Ty::Optional(_), Value::Optional(_)) => true,
        _ => false,
    }
}

/// Whether cel-go resolves `n` as an attribute of a variable (a select or
/// constant index path from it), which yields the variable's Go value as
/// it is, not a CEL value.
pub(super) fn raw_attribute(n: &Node) -> bool {
    match n {
        Node::Global(_) => true,
        Node::Select {
            operand,
            optional: false,
            ..
        } => raw_attribute(operand),
        Node::Index {
            operand,
            index,
            optional: false,
        } => matches!(**index, Node::Const(_)) && raw_attribute(operand),
        _ => false,
    }
}

/// cel-go refuses a list or map as an index by its Go type: a JSON value
/// read straight from a variable is Go's own slice or map, any other a
/// CEL list or map.
pub(super) fn aggregate_qualifier(i: &Value, raw: bool) -> EvalError {
    let go_type = match i {
        Value::List(List::Json(_)) if raw => "[]interface {}",
        Value::Map(Map::Json(_)) if raw => "map[string]interface {}",
        Value::Map(_) => "*types.baseMap",
        Value::List(List::Concat(_)) => "*types.concatList",
        _ => "*types.baseList",
    };
    EvalError::new(format!("invalid qualifier type: {go_type}"))
}

/// Go's message for asserting that `v` is a `traits.Lister` (`None` for
/// a list, or a value whose Go type is not known here): the interface's
/// first method (in name order) the value's type lacks.
pub(super) fn not_a_lister(v: &EvalResult<Value>) -> Option<&'static str> {
    Some(match v {
        Err(_) => "*types.Err is not traits.Lister: missing method Add",
        Ok(Value::Null) => "types.Null is not traits.Lister: missing method Add",
        Ok(Value::Bool(_)) => "types.Bool is not traits.Lister: missing method Add",
        Ok(Value::Optional(_)) => "*types.Optional is not traits.Lister: missing method Add",
        Ok(Value::Int(_)) => "types.Int is not traits.Lister: missing method Contains",
        Ok(Value::Uint(_)) => "types.Uint is not traits.Lister: missing method Contains",
        Ok(Value::Double(_)) => "types.Double is not traits.Lister: missing method Contains",
        Ok(Value::String(_)) => "types.String is not traits.Lister: missing method Contains",
        Ok(Value::Bytes(_)) => "types.Bytes is not traits.Lister: missing method Contains",
        Ok(Value::Duration(_)) => "types.Duration is not traits.Lister: missing method Contains",
        Ok(Value::Timestamp(_)) => "types.Timestamp is not traits.Lister: missing method Contains",
        Ok(_) => return None,
    })
}

/// A key or index as cel-go prints it in its messages (Go's `%v`).
pub(super) fn go_value(i: &Value) -> String {
    use crate::cel::functions::time::{go_duration, go_time};
    match i {
        Value::String(s) => s.as_str().to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => crate::cel::functions::core::format_double(*d),
        // `types.Null` is a Go integer type without a `String` method.
        Value::Null => "0".into(),
        Value::Duration(d) => go_duration(*d),
        Value::Timestamp(t) => go_time(*t),
        Value::Opaque(o) => match o.to_json() {
            crate::cel::value::Json::String(s) => s,
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// The Go type of a value as cel-go names it in its `%T` messages (`None`
/// for lists and maps, whose Go types vary with their origin, and library
/// values not known here).
pub(super) fn go_type(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::Null => "types.Null",
        Value::Bool(_) => "types.Bool",
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Double(_) => "types.Double",
        Value::String(_) => "types.String",
        Value::Bytes(_) => "types.Bytes",
        Value::Duration(_) => "types.Duration",
        Value::Timestamp(_) => "types.Timestamp",
        Value::Optional(_) => "*types.Optional",
        Value::Type(_) => "*types.Type",
        Value::Opaque(o) => crate::cel::k8s_bindings::go_type_name(o.as_ref())?,
        Value::List(_) | Value::Map(_) => return None,
    })
}

/// cel-go makes a qualifier of the index value before it applies it: one
/// of another type than string, int, uint, bool or double is refused by
/// its Go type.
pub(super) fn invalid_qualifier(i: &Value) -> Option<EvalError> {
    match i {
        Value::String(_) | Value::Int(_) | Value::Uint(_) | Value::Bool(_) | Value::Double(_) => {
            None
        }
        other => go_type(other).map(|t| EvalError::new(format!("invalid qualifier type: {t}"))),
    }
}

/// `v[i]`, or `v[?i]` when `optional`.
pub fn index_value<'a>(v: Value<'a>, i: &Value<'a>, optional: bool) -> EvalResult<Value<'a>> {
    if let Some(e) = invalid_qualifier(i) {
        return Err(e);
    }
    let wrap = |x: Option<Value<'a>>| -> EvalResult<Value<'a>> {
        if optional {
            Ok(Value::optional(x))
        } else {
            x.ok_or_else(|| EvalError::no_such_key(go_value(i)))
        }
    };
    match v {
        Value::List(l) => {
            let idx = list_index(i)?;
            match idx.filter(|&x| x < l.len()) {
                Some(x) => wrap(l.get(x)),
                None if optional => Ok(Value::Optional(None)),
                None => Err(EvalError::new(format!(
                    "index out of bounds: {}",
                    go_value(i)
                ))),
            }
        }
        Value::Map(m) => wrap(m.get(i)),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => index_value((*inner).clone(), i, true),
        // Values that are neither maps nor lists have no keys; an
        // optional index only finds none.
        _ if optional => Ok(Value::Optional(None)),
        _ => Err(EvalError::no_such_key(go_value(i))),
    }
}

pub(super) fn list_index(i: &Value) -> EvalResult<Option<usize>> {
    match i {
        Value::Int(x) => Ok(usize::try_from(*x).ok()),
        Value::Uint(x) => Ok(usize::try_from(*x).ok()),
        Value::Double(d) if d.fract() == 0.0 && d.is_finite() => {
            Ok(if *d >= 0.0 { Some(*d as usize) } else { None })
        }
        Value::Double(d) => Err(EvalError::new(format!("unsupported index value: {d}"))),
        other => Err(EvalError::new(format!(
            "unsupported index type '{}' in list",
            other.type_name()
        ))),
    }
}
