//! CEL values. Objects from JSON are borrowed, not copied: a `Value<'a>`
//! may point into the `serde_json::Value` it was read from.

use super::error::{EvalError, EvalResult};
use indexmap::IndexMap;
use std::any::Any;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub type Json = serde_json::Value;
pub type JsonMap = serde_json::Map<String, Json>;

#[derive(Clone, Debug)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Str<'a>),
    Bytes(Arc<[u8]>),
    List(List<'a>),
    Map(Map<'a>),
    Duration(Duration),
    Timestamp(Timestamp),
    Type(Type),
    Optional(Option<Arc<Value<'a>>>),
    Opaque(Arc<dyn Opaque>),
}

/// A string borrowed from the input or shared between values.
#[derive(Clone, Debug)]
pub enum Str<'a> {
    Borrowed(&'a str),
    Shared(Arc<str>),
}

impl<'a> Str<'a> {
    pub fn as_str(&self) -> &str {
        match self {
            Str::Borrowed(s) => s,
            Str::Shared(s) => s,
        }
    }
}

impl PartialEq for Str<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for Str<'_> {}
impl Hash for Str<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

#[derive(Clone, Debug)]
pub enum List<'a> {
    Json(&'a [Json]),
    Owned(Arc<Vec<Value<'a>>>),
    /// Two lists joined with `+`, which cel-go keeps as a view of both
    /// (Go type `*types.concatList`, which its messages name).
    Concat(Arc<Vec<Value<'a>>>),
}

impl<'a> List<'a> {
    pub fn len(&self) -> usize {
        match self {
            List::Json(l) => l.len(),
            List::Owned(l) | List::Concat(l) => l.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        match self {
            List::Json(l) => l.get(i).map(Value::from_json),
            List::Owned(l) | List::Concat(l) => l.get(i).cloned(),
        }
    }
    pub fn iter(&self) -> ListIter<'a, '_> {
        ListIter { list: self, at: 0 }
    }
    pub fn to_vec(&self) -> Vec<Value<'a>> {
        self.iter().collect()
    }
    pub fn from_vec(v: Vec<Value<'a>>) -> Self {
        List::Owned(Arc::new(v))
    }
}

pub struct ListIter<'a, 'l> {
    list: &'l List<'a>,
    at: usize,
}

impl<'a> Iterator for ListIter<'a, '_> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        let v = self.list.get(self.at)?;
        self.at += 1;
        Some(v)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.list.len() - self.at;
        (n, Some(n))
    }
}

/// Map keys. The CEL specification allows int, uint, bool and string;
/// cel-go builds a map literal as a Go map keyed by any CEL value Go can
/// hash, and kube-apiserver's maps hold them all (`Other`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Str<'a>),
    /// Boxed, so that the ordinary keys stay small.
    Other(Box<GoKey<'a>>),
}

/// A key Go cannot hash: cel-go panics (`hash of unhashable type`, with
/// the value's Go type), which fails the whole evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unhashable(pub &'static str);

impl fmt::Display for Unhashable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "internal error: runtime error: hash of unhashable type {}",
            self.0
        )
    }
}

impl<'a> Key<'a> {
    /// The key of `v` as cel-go's Go map holds it.
    pub fn from_value(v: &Value<'a>) -> Result<Key<'a>, Unhashable> {
        Ok(match v {
            Value::Bool(b) => Key::Bool(*b),
            Value::Int(i) => Key::Int(*i),
            Value::Uint(u) => Key::Uint(*u),
            Value::String(s) => Key::String(s.clone()),
            Value::Bytes(_) => return Err(Unhashable("types.Bytes")),
            // A semantic version holds slices (its pre-release and build).
            Value::Opaque(o) if o.type_name() == "kubernetes.Semver" => {
                return Err(Unhashable("cel.Semver"))
            }
            other => Key::Other(Box::new(GoKey(other.clone()))),
        })
    }

    /// The key of `v` under the CEL specification's rules (the
    /// conformance environment): int, uint, bool and string only.
    pub fn spec_key(v: &Value<'a>) -> EvalResult<Key<'a>> {
        match v {
            Value::Bool(_) | Value::Int(_) | Value::Uint(_) | Value::String(_) => {
                Key::from_value(v).map_err(|u| EvalError::new(u.to_string()))
            }
            other => Err(EvalError::new(format!(
                "unsupported key type: {}",
                other.type_name()
            ))),
        }
    }

    pub fn to_value(&self) -> Value<'a> {
        match self {
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(i) => Value::Int(*i),
            Key::Uint(u) => Value::Uint(*u),
            Key::String(s) => Value::String(s.clone()),
            Key::Other(k) => k.0.clone(),
        }
    }
}

/// Any other key, compared as Go's `==` compares the CEL value behind it:
/// null, doubles (NaN equals nothing, not even itself), durations,
/// timestamps (instant and offset), types, IPs and CIDRs by value; lists,
/// maps, optionals with a value, quantities, URLs and the authorizer's
/// values by identity (cel-go's are pointers), which here is the shared
/// allocation behind the value.
#[derive(Clone, Debug)]
pub struct GoKey<'a>(Value<'a>);

/// Library types whose Go values are structs compared by content.
fn by_value(o: &dyn Opaque) -> bool {
    matches!(o.type_name(), "net.IP" | "net.CIDR")
}

/// The address behind a value cel-go holds by pointer.
fn identity(v: &Value) -> Option<(*const (), usize)> {
    Some(match v {
        Value::List(List::Owned(l) | List::Concat(l)) => (Arc::as_ptr(l).cast(), 0),
        Value::List(List::Json(l)) => (l.as_ptr().cast(), l.len()),
        Value::Map(Map::Owned(m)) => (Arc::as_ptr(m).cast(), 0),
        Value::Map(Map::Json(m)) => ((*m as *const JsonMap).cast(), 0),
        Value::Optional(Some(x)) => (Arc::as_ptr(x).cast(), 0),
        Value::Opaque(o) if !by_value(o.as_ref()) => (Arc::as_ptr(o).cast(), 0),
        _ => return None,
    })
}

impl PartialEq for GoKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        use Value::*;
        match (&self.0, &other.0) {
            (Null, Null) | (Optional(None), Optional(None)) => true,
            (Double(a), Double(b)) => a == b,
            (Duration(a), Duration(b)) => a == b,
            (Timestamp(a), Timestamp(b)) => a == b && a.offset == b.offset,
            (Type(a), Type(b)) => a == b,
            (Opaque(a), Opaque(b)) if by_value(a.as_ref()) => a.equals(b.as_ref()),
            (a, b) => identity(a).is_some_and(|x| identity(b) == Some(x)),
        }
    }
}
impl Eq for GoKey<'_> {}

impl Hash for GoKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(&self.0).hash(state);
        match &self.0 {
            // 0.0 and -0.0 are one key.
            Value::Double(d) if *d == 0.0 => 0u64.hash(state),
            Value::Double(d) => d.to_bits().hash(state),
            Value::Duration(d) => d.hash(state),
            Value::Timestamp(t) => (t.secs, t.nanos, t.offset).hash(state),
            Value::Type(t) => t.name().hash(state),
            Value::Opaque(o) if by_value(o.as_ref()) => o.to_json().to_string().hash(state),
            v => identity(v).hash(state),
        }
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Bool(b) => write!(f, "{b}"),
            Key::Int(i) => write!(f, "{i}"),
            Key::Uint(u) => write!(f, "{u}u"),
            Key::String(s) => write!(f, "{}", s.as_str()),
            Key::Other(k) => write!(f, "{}", k.0),
        }
    }
}

/// JSON maps up to this size are searched by comparing keys in order
/// rather than by hashing the key: most Kubernetes objects' maps are this
/// small (a container has about a dozen fields), and hashing a key with
/// serde_json's SipHash costs more than that many string comparisons.
const LINEAR_LOOKUP_MAX: usize = 16;
/// The same for maps CEL built, whose hasher (aHash) is cheaper.
const LINEAR_LOOKUP_MAX_OWNED: usize = 8;

/// A map CEL built. Keyed per process at random, as std's hasher is (keys
/// come from tenants' objects), but several times cheaper than SipHash on
/// short keys: policies build many small maps per request.
pub type OwnedMap<'a> = IndexMap<Key<'a>, Value<'a>, SeededAHash>;

/// aHash with keys drawn at random once per process: for maps whose keys
/// come from tenants' objects (CEL maps, the inventory's tables), several
/// times cheaper than std's SipHash on short keys. A map gets its keys
/// without the shared counter `ahash::RandomState::new` increments, which
/// every evaluating thread would write.
#[derive(Clone, Copy, Default, Debug)]
pub struct SeededAHash;

impl std::hash::BuildHasher for SeededAHash {
    type Hasher = ahash::AHasher;
    fn build_hasher(&self) -> ahash::AHasher {
        static KEYS: std::sync::OnceLock<ahash::RandomState> = std::sync::OnceLock::new();
        KEYS.get_or_init(ahash::RandomState::new).build_hasher()
    }
}

#[derive(Clone, Debug)]
pub enum Map<'a> {
    Json(&'a JsonMap),
    Owned(Arc<OwnedMap<'a>>),
}

impl<'a> Map<'a> {
    pub fn len(&self) -> usize {
        match self {
            Map::Json(m) => m.len(),
            Map::Owned(m) => m.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get_str(&self, key: &str) -> Option<Value<'a>> {
        match self {
            Map::Json(m) if m.len() <= LINEAR_LOOKUP_MAX => m
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| Value::from_json(v)),
            Map::Json(m) => m.get(key).map(Value::from_json),
            Map::Owned(m) if m.len() <= LINEAR_LOOKUP_MAX_OWNED => m
                .iter()
                .find(|(k, _)| matches!(k, Key::String(s) if s.as_str() == key))
                .map(|(_, v)| v.clone()),
            Map::Owned(m) => m.get(&Key::String(Str::Borrowed(key))).cloned(),
        }
    }

    /// Looks a key up as cel-go finds it in a map: the key itself, then a
    /// number's other spellings (`{1: x}[1u]` and `{1: x}[1.0]` find `x`).
    /// A JSON object has string keys only; a key Go cannot hash panics in
    /// a map that is not empty.
    pub fn find(&self, key: &Value<'a>) -> Result<Option<Value<'a>>, Unhashable> {
        match (self, key) {
            (_, Value::String(s)) => Ok(self.get_str(s.as_str())),
            (Map::Json(_), _) => Ok(None),
            (Map::Owned(m), _) if m.is_empty() => Ok(None),
            (Map::Owned(m), _) => {
                if let Some(v) = m.get(&Key::from_value(key)?) {
                    return Ok(Some(v.clone()));
                }
                Ok(numeric_twins(key).find_map(|k| m.get(&k).cloned()))
            }
        }
    }

    /// [`Map::find`] for a key that is hashable (an index, or a key of
    /// another map).
    pub fn get(&self, key: &Value<'a>) -> Option<Value<'a>> {
        self.find(key).ok().flatten()
    }

    /// The first entry in iteration order.
    pub fn first(&self) -> Option<(Value<'a>, Value<'a>)> {
        match self {
            Map::Json(m) => m.iter().next().map(|(k, v)| {
                (
                    Value::String(Str::Borrowed(k.as_str())),
                    Value::from_json(v),
                )
            }),
            Map::Owned(m) => m.first().map(|(k, v)| (k.to_value(), v.clone())),
        }
    }

    pub fn keys(&self) -> Vec<Value<'a>> {
        match self {
            Map::Json(m) => m
                .keys()
                .map(|k| Value::String(Str::Borrowed(k.as_str())))
                .collect(),
            Map::Owned(m) => m.keys().map(Key::to_value).collect(),
        }
    }

    pub fn entries(&self) -> Vec<(Value<'a>, Value<'a>)> {
        match self {
            Map::Json(m) => m
                .iter()
                .map(|(k, v)| {
                    (
                        Value::String(Str::Borrowed(k.as_str())),
                        Value::from_json(v),
                    )
                })
                .collect(),
            Map::Owned(m) => m.iter().map(|(k, v)| (k.to_value(), v.clone())).collect(),
        }
    }
}

/// The other keys a number is found under, in cel-go's order: an int as
/// a uint, a uint as an int, a double as an int then as a uint, when the
/// conversion is exact.
fn numeric_twins<'a>(key: &Value<'a>) -> impl Iterator<Item = Key<'a>> {
    let (int, uint) = match *key {
        Value::Int(i) => (None, u64::try_from(i).ok()),
        Value::Uint(u) => (i64::try_from(u).ok(), None),
        Value::Double(d) if d.fract() == 0.0 => (
            (-9.223_372_036_854_776E18..9.223_372_036_854_776E18)
                .contains(&d)
                .then_some(d as i64),
            (0.0..1.844_674_407_370_955_2E19)
                .contains(&d)
                .then_some(d as u64),
        ),
        _ => (None, None),
    };
    int.map(Key::Int).into_iter().chain(uint.map(Key::Uint))
}

/// A span of time with nanosecond precision, as Go's time.Duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub i64);

/// An instant, as seconds and nanoseconds since the Unix epoch (UTC), and
/// the UTC offset it was written with: cel-go keeps the offset a timestamp
/// was parsed with (Go's `time.Time` location), so `string()` and the
/// getters without a time zone read the time at that offset. Equality,
/// ordering and hashing compare instants only.
#[derive(Clone, Copy, Debug)]
pub struct Timestamp {
    pub secs: i64,
    pub nanos: u32,
    /// Seconds east of UTC.
    pub offset: i32,
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        (self.secs, self.nanos) == (other.secs, other.nanos)
    }
}
impl Eq for Timestamp {}
impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.secs, self.nanos).cmp(&(other.secs, other.nanos))
    }
}
impl Hash for Timestamp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.secs, self.nanos).hash(state);
    }
}

/// Seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: CEL's range.
pub const MIN_TIMESTAMP_SECS: i64 = -62_135_596_800;
pub const MAX_TIMESTAMP_SECS: i64 = 253_402_300_799;

impl Timestamp {
    pub fn new(secs: i64, nanos: u32) -> EvalResult<Timestamp> {
        if !(MIN_TIMESTAMP_SECS..=MAX_TIMESTAMP_SECS).contains(&secs) {
            return Err(EvalError::new("timestamp out of range"));
        }
        Ok(Timestamp {
            secs,
            nanos,
            offset: 0,
        })
    }
    /// The same instant, written at `offset` seconds east of UTC.
    pub fn at_offset(self, offset: i32) -> Timestamp {
        Timestamp { offset, ..self }
    }
    pub fn total_nanos(&self) -> i128 {
        self.secs as i128 * 1_000_000_000 + self.nanos as i128
    }
    pub fn from_total_nanos(n: i128) -> EvalResult<Timestamp> {
        let secs = n.div_euclid(1_000_000_000);
        let nanos = n.rem_euclid(1_000_000_000) as u32;
        let secs = i64::try_from(secs).map_err(|_| EvalError::new("timestamp out of range"))?;
        Timestamp::new(secs, nanos)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List,
    Map,
    Type,
    Duration,
    Timestamp,
    Optional,
    Dyn,
    /// A named type from a library (`kubernetes.Quantity`, `net.IP`, ...).
    Named(Arc<str>),
}

impl Type {
    pub fn name(&self) -> &str {
        match self {
            Type::Null => "null_type",
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Uint => "uint",
            Type::Double => "double",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::List => "list",
            Type::Map => "map",
            Type::Type => "type",
            Type::Duration => "google.protobuf.Duration",
            Type::Timestamp => "google.protobuf.Timestamp",
            Type::Optional => "optional_type",
            Type::Dyn => "dyn",
            Type::Named(n) => n,
        }
    }

    /// The type denoted by an identifier, if the name is a type name.
    pub fn from_name(name: &str) -> Option<Type> {
        Some(match name {
            "null_type" => Type::Null,
            "bool" => Type::Bool,
            "int" => Type::Int,
            "uint" => Type::Uint,
            "double" => Type::Double,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "list" => Type::List,
            "map" => Type::Map,
            "type" => Type::Type,
            "google.protobuf.Duration" => Type::Duration,
            "google.protobuf.Timestamp" => Type::Timestamp,
            "optional_type" => Type::Optional,
            _ => return None,
        })
    }
}

/// Values of library types (quantities, IPs, URLs...). They live as long as
/// the evaluation needs them and never borrow the input.
pub trait Opaque: Send + Sync + fmt::Debug + 'static {
    fn type_name(&self) -> &'static str;
    fn as_any(&self) -> &dyn Any;
    fn equals(&self, other: &dyn Opaque) -> bool;
    /// Ordering, for types that have one.
    fn compare(&self, _other: &dyn Opaque) -> Option<Ordering> {
        None
    }
    /// JSON form for output.
    fn to_json(&self) -> Json {
        Json::String(format!("{self:?}"))
    }
}

impl<'a> Value<'a> {
    pub fn from_json(j: &'a Json) -> Value<'a> {
        match j {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Uint(u)
                } else {
                    Value::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(s) => Value::String(Str::Borrowed(s)),
            Json::Array(a) => Value::List(List::Json(a)),
            Json::Object(m) => Value::Map(Map::Json(m)),
        }
    }

    /// The value of JSON text, owning its strings, lists and maps: what
    /// `Value::from_json` gives of the parsed text, but owned, and without
    /// building the `serde_json::Value` in between (the inventory reads its
    /// compact objects this way on every lookup).
    pub fn from_json_slice(text: &[u8]) -> Result<Value<'static>, serde_json::Error> {
        serde_json::from_slice::<OwnedJson>(text).map(|o| o.0)
    }

    pub fn string(s: impl Into<Arc<str>>) -> Value<'a> {
        Value::String(Str::Shared(s.into()))
    }

    pub fn list(v: Vec<Value<'a>>) -> Value<'a> {
        Value::List(List::from_vec(v))
    }

    pub fn map(m: OwnedMap<'a>) -> Value<'a> {
        Value::Map(Map::Owned(Arc::new(m)))
    }

    pub fn optional(v: Option<Value<'a>>) -> Value<'a> {
        Value::Optional(v.map(Arc::new))
    }

    pub fn type_of(&self) -> Type {
        match self {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Bool,
            Value::Int(_) => Type::Int,
            Value::Uint(_) => Type::Uint,
            Value::Double(_) => Type::Double,
            Value::String(_) => Type::String,
            Value::Bytes(_) => Type::Bytes,
            Value::List(_) => Type::List,
            Value::Map(_) => Type::Map,
            Value::Duration(_) => Type::Duration,
            Value::Timestamp(_) => Type::Timestamp,
            Value::Type(_) => Type::Type,
            Value::Optional(_) => Type::Optional,
            Value::Opaque(o) => Type::Named(o.type_name().into()),
        }
    }

    pub fn type_name(&self) -> String {
        self.type_of().name().to_string()
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// CEL equality: heterogeneous numbers compare by value, other types
    /// that differ are unequal (not an error).
    pub fn equals(&self, other: &Value<'a>) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (String(a), String(b)) => a.as_str() == b.as_str(),
            (Bytes(a), Bytes(b)) => a == b,
            (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => {
                numeric_cmp(self, other) == Some(Ordering::Equal)
            }
            (List(a), List(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(&y))
            }
            (Map(a), Map(b)) => {
                a.len() == b.len()
                    && a.entries().iter().all(|(k, v)| match b.get(k) {
                        Some(w) => v.equals(&w),
                        _ => false,
                    })
            }
            (Duration(a), Duration(b)) => a == b,
            (Timestamp(a), Timestamp(b)) => a == b,
            (Type(a), Type(b)) => a.name() == b.name(),
            (Optional(a), Optional(b)) => match (a, b) {
                (None, None) => true,
                (Some(x), Some(y)) => x.equals(y),
                _ => false,
            },
            (Opaque(a), Opaque(b)) => a.equals(b.as_ref()),
            _ => false,
        }
    }

    /// CEL ordering for `<` and friends; `None` when the pair has no order.
    pub fn compare(&self, other: &Value<'a>) -> EvalResult<Ordering> {
        use Value::*;
        let ord = match (self, other) {
            (Int(_) | Uint(_) | Double(_), Int(_) | Uint(_) | Double(_)) => {
                numeric_cmp(self, other)
            }
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            (String(a), String(b)) => Some(a.as_str().cmp(b.as_str())),
            (Bytes(a), Bytes(b)) => Some(a.cmp(b)),
            (Duration(a), Duration(b)) => Some(a.cmp(b)),
            (Timestamp(a), Timestamp(b)) => Some(a.cmp(b)),
            (Opaque(a), Opaque(b)) => a.compare(b.as_ref()),
            _ => return Err(EvalError::no_overload("_<_")),
        };
        // NaN compares false with everything; report as "unordered".
        ord.ok_or_else(|| EvalError::new("unordered"))
    }

    /// The JSON form: bytes base64, durations "1.5s", timestamps RFC 3339.
    pub fn to_json(&self) -> Json {
        use base64::Engine;
        match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => Json::from(*i),
            Value::Uint(u) => Json::from(*u),
            Value::Double(d) => serde_json::Number::from_f64(*d)
                .map(Json::Number)
                .unwrap_or_else(|| {
                    Json::String(if d.is_nan() {
                        "NaN".into()
                    } else if *d > 0.0 {
                        "Infinity".into()
                    } else {
                        "-Infinity".into()
                    })
                }),
            Value::String(s) => Json::String(s.as_str().to_string()),
            Value::Bytes(b) => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
            Value::List(l) => Json::Array(l.iter().map(|v| v.to_json()).collect()),
            Value::Map(Map::Json(m)) => Json::Object((*m).clone()),
            Value::Map(Map::Owned(m)) => Json::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
            Value::Duration(d) => Json::String(super::functions::time::format_duration(*d)),
            Value::Timestamp(t) => Json::String(super::functions::time::format_timestamp(*t)),
            Value::Type(t) => Json::String(t.name().to_string()),
            Value::Optional(None) => Json::Null,
            Value::Optional(Some(v)) => v.to_json(),
            Value::Opaque(o) => o.to_json(),
        }
    }
}

/// Compares numbers across int, uint and double exactly (no rounding of
/// large integers through f64).
pub fn numeric_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Uint(x), Uint(y)) => Some(x.cmp(y)),
        (Double(x), Double(y)) => x.partial_cmp(y),
        (Int(x), Uint(y)) => Some((*x as i128).cmp(&(*y as i128))),
        (Uint(x), Int(y)) => Some((*x as i128).cmp(&(*y as i128))),
        (Int(x), Double(y)) => cmp_i128_f64(*x as i128, *y),
        (Uint(x), Double(y)) => cmp_i128_f64(*x as i128, *y),
        (Double(x), Int(y)) => cmp_i128_f64(*y as i128, *x).map(Ordering::reverse),
        (Double(x), Uint(y)) => cmp_i128_f64(*y as i128, *x).map(Ordering::reverse),
        _ => None,
    }
}

/// As cel-go: out-of-range doubles order outside every integer; otherwise
/// the integer is compared as a double (lossy above 2^53, like cel-go).
fn cmp_i128_f64(i: i128, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    let (lo, hi) = if i < 0 || i <= i64::MAX as i128 {
        (i64::MIN as f64, i64::MAX as f64)
    } else {
        (0.0, u64::MAX as f64)
    };
    if d < lo {
        return Some(Ordering::Greater);
    }
    if d > hi {
        return Some(Ordering::Less);
    }
    (i as f64).partial_cmp(&d)
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write!(f, "{:?}", s.as_str()),
            Value::Uint(u) => write!(f, "{u}u"),
            Value::Type(t) => write!(f, "{}", t.name()),
            Value::Optional(None) => write!(f, "optional.none()"),
            Value::Optional(Some(v)) => write!(f, "optional.of({v})"),
            other => write!(f, "{}", other.to_json()),
        }
    }
}

/// A value parsed from JSON text by [`Value::from_json_slice`].
struct OwnedJson(Value<'static>);

impl<'de> serde::Deserialize<'de> for OwnedJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OwnedJsonVisitor)
    }
}

struct OwnedJsonVisitor;

impl<'de> serde::de::Visitor<'de> for OwnedJsonVisitor {
    type Value = OwnedJson;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::Bool(b)))
    }
    fn visit_i64<E>(self, i: i64) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::Int(i)))
    }
    // An int when it fits one, as `Value::from_json` reads a number.
    fn visit_u64<E>(self, u: u64) -> Result<OwnedJson, E> {
        Ok(OwnedJson(
            i64::try_from(u).map_or(Value::Uint(u), Value::Int),
        ))
    }
    fn visit_f64<E>(self, d: f64) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::Double(d)))
    }
    fn visit_str<E>(self, s: &str) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::string(s)))
    }
    fn visit_unit<E>(self) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::Null))
    }
    fn visit_none<E>(self) -> Result<OwnedJson, E> {
        Ok(OwnedJson(Value::Null))
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<OwnedJson, D::Error> {
        <OwnedJson as serde::Deserialize>::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<OwnedJson, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(OwnedJson(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(OwnedJson(Value::list(items)))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OwnedJson, A::Error> {
        let mut out = OwnedMap::default();
        while let Some((k, OwnedJson(v))) = map.next_entry::<std::borrow::Cow<str>, OwnedJson>()? {
            out.insert(Key::String(Str::Shared(k.as_ref().into())), v);
        }
        Ok(OwnedJson(Value::map(out)))
    }
}

#[cfg(test)]
#[path = "value_tests.rs"]
mod tests;
