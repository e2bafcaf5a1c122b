//! Binds the Kubernetes libraries in [`super::k8s`] to CEL functions:
//! quantity, IP, CIDR, URL, semver and named formats.

use super::error::{EvalError, EvalResult};
use super::functions::{no_overload, str_arg, Arity, FnDecl, Lib, LibSet, Style};
use super::k8s::format::NamedFormat;
use super::k8s::net::{Cidr, Ip};
use super::k8s::quantity::Quantity;
use super::k8s::semver::Semver;
use super::k8s::url::Url;
use super::program::Ctx;
use super::value::{Json, Key, Opaque, Str, Type, Value};
use std::any::Any;
use std::cmp::Ordering;
use std::sync::Arc;

macro_rules! opaque {
    ($name:ident, $inner:ty, $type_name:expr, ord: $ord:expr) => {
        #[derive(Debug)]
        pub struct $name(pub $inner);
        impl Opaque for $name {
            fn type_name(&self) -> &'static str {
                $type_name
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
            fn equals(&self, other: &dyn Opaque) -> bool {
                other.as_any().downcast_ref::<$name>().is_some_and(|o| {
                    self.compare(o) == Some(Ordering::Equal)
                        || (self.compare(o).is_none()
                            && format!("{}", self.0) == format!("{}", o.0))
                })
            }
            fn compare(&self, other: &dyn Opaque) -> Option<Ordering> {
                let o = other.as_any().downcast_ref::<$name>()?;
                let f: fn(&$inner, &$inner) -> Option<Ordering> = $ord;
                f(&self.0, &o.0)
            }
            fn to_json(&self) -> Json {
                Json::String(self.0.to_string())
            }
        }
    };
}

opaque!(QuantityValue, Quantity, "kubernetes.Quantity", ord: |a, b| Some(a.compare(b)));
opaque!(SemverValue, Semver, "kubernetes.Semver", ord: |a, b| Some(a.cmp(b)));
opaque!(IpValue, Ip, "net.IP", ord: |_, _| None);
opaque!(CidrValue, Cidr, "net.CIDR", ord: |_, _| None);
opaque!(UrlValue, Url, "kubernetes.URL", ord: |_, _| None);

/// `lhs == rhs` for a library value on the left, as kube-apiserver's
/// types answer it (`None` for values that compare like any other). A
/// quantity, semver, IP, CIDR or URL refuses to compare with a value of
/// another type (`no such overload`, where CEL's values are just unequal);
/// a quantity also refuses the result of `add` or `sub`, which the library
/// returns by pointer (see [`Quantity::cel_equal`]).
pub fn library_equal(lhs: &dyn Opaque, rhs: &Value) -> Option<EvalResult<bool>> {
    let refused = || Some(Err(EvalError::no_overload("_==_")));
    if let Some(x) = lhs.as_any().downcast_ref::<QuantityValue>() {
        return match opaque::<QuantityValue>(rhs) {
            Some(y) => x.0.cel_equal(&y.0).map(Ok).or_else(refused),
            None if matches!(rhs, Value::Null) => None,
            None => refused(),
        };
    }
    let strict = matches!(
        lhs.type_name(),
        "kubernetes.Semver" | "net.IP" | "net.CIDR" | "kubernetes.URL"
    );
    match rhs {
        Value::Opaque(o) if o.type_name() == lhs.type_name() => None,
        Value::Null => None,
        _ if strict => refused(),
        _ => None,
    }
}

/// The Go type kube-apiserver names a library value by in
/// `invalid qualifier type: %T` (`None` when unknown).
pub fn go_type_name(v: &dyn Opaque) -> Option<&'static str> {
    if let Some(q) = v.as_any().downcast_ref::<QuantityValue>() {
        return Some(if q.0.is_arithmetic_result() {
            "*cel.Quantity"
        } else {
            "cel.Quantity"
        });
    }
    match v.type_name() {
        "kubernetes.Semver" => Some("cel.Semver"),
        "net.IP" => Some("cel.IP"),
        "net.CIDR" => Some("cel.CIDR"),
        "kubernetes.URL" => Some("cel.URL"),
        _ => None,
    }
}

#[derive(Debug)]
pub struct FormatValue(pub NamedFormat);
impl Opaque for FormatValue {
    fn type_name(&self) -> &'static str {
        "kubernetes.NamedFormat"
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other
            .as_any()
            .downcast_ref::<FormatValue>()
            .is_some_and(|o| o.0 == self.0)
    }
    fn to_json(&self) -> Json {
        Json::String(self.0.name().to_string())
    }
}

fn opaque<'v, T: 'static>(v: &'v Value) -> Option<&'v T> {
    match v {
        Value::Opaque(o) => o.as_any().downcast_ref::<T>(),
        _ => None,
    }
}

fn wrap<'a, T: Opaque>(t: T) -> Value<'a> {
    Value::Opaque(Arc::new(t))
}

fn err(e: impl std::fmt::Display) -> EvalError {
    EvalError::new(e.to_string())
}

const fn g(name: &'static str, n: usize, lib: Lib, imp: super::functions::Imp) -> FnDecl {
    FnDecl::global(name, n, lib, imp)
}
const fn m(name: &'static str, n: usize, lib: Lib, imp: super::functions::Imp) -> FnDecl {
    FnDecl::member(name, n, lib, imp)
}

static DECLS: &[FnDecl] = &[
    // quantity
    g("quantity", 1, Lib::Quantity, quantity),
    g("isQuantity", 1, Lib::Quantity, is_quantity),
    FnDecl::both("sign", 1, Lib::Quantity, q_sign),
    m("isInteger", 1, Lib::Quantity, q_is_integer),
    m("asInteger", 1, Lib::Quantity, q_as_integer),
    m("asApproximateFloat", 1, Lib::Quantity, q_as_float),
    m("add", 2, Lib::Quantity, q_add),
    m("sub", 2, Lib::Quantity, q_sub),
    // shared by quantity and semver
    m("isLessThan", 2, Lib::Quantity, is_less_than),
    m("isGreaterThan", 2, Lib::Quantity, is_greater_than),
    m("compareTo", 2, Lib::Quantity, compare_to),
    // semver
    FnDecl::new(
        "semver",
        Style::Global,
        Arity::Range(1, 2),
        Lib::Semver,
        semver,
    ),
    FnDecl::new(
        "isSemver",
        Style::Global,
        Arity::Range(1, 2),
        Lib::Semver,
        is_semver,
    ),
    m("major", 1, Lib::Semver, sv_major),
    m("minor", 1, Lib::Semver, sv_minor),
    m("patch", 1, Lib::Semver, sv_patch),
    // ip
    g("ip", 1, Lib::Ip, ip),
    g("isIP", 1, Lib::Ip, is_ip),
    g("ip.isCanonical", 1, Lib::Ip, ip_is_canonical),
    m("family", 1, Lib::Ip, ip_family),
    m("isUnspecified", 1, Lib::Ip, ip_is_unspecified),
    m("isLoopback", 1, Lib::Ip, ip_is_loopback),
    m("isLinkLocalMulticast", 1, Lib::Ip, ip_is_llm),
    m("isLinkLocalUnicast", 1, Lib::Ip, ip_is_llu),
    m("isGlobalUnicast", 1, Lib::Ip, ip_is_global),
    // cidr
    g("cidr", 1, Lib::Cidr, cidr),
    g("isCIDR", 1, Lib::Cidr, is_cidr),
    m("containsIP", 2, Lib::Cidr, cidr_contains_ip),
    m("containsCIDR", 2, Lib::Cidr, cidr_contains_cidr),
    m("ip", 1, Lib::Cidr, cidr_ip),
    m("masked", 1, Lib::Cidr, cidr_masked),
    m("prefixLength", 1, Lib::Cidr, cidr_prefix_length),
    // url
    g("url", 1, Lib::Urls, url),
    g("isURL", 1, Lib::Urls, is_url),
    m("getScheme", 1, Lib::Urls, url_scheme),
    m("getHost", 1, Lib::Urls, url_host),
    m("getHostname", 1, Lib::Urls, url_hostname),
    m("getPort", 1, Lib::Urls, url_port),
    m("getEscapedPath", 1, Lib::Urls, url_path),
    m("getQuery", 1, Lib::Urls, url_query),
    // named formats
    g("format.named", 1, Lib::Format, format_named),
    m("validate", 2, Lib::Format, format_validate),
    g("format.dns1123Label", 0, Lib::Format, f_dns1123_label),
    g(
        "format.dns1123Subdomain",
        0,
        Lib::Format,
        f_dns1123_subdomain,
    ),
    g("format.dns1035Label", 0, Lib::Format, f_dns1035_label),
    g("format.qualifiedName", 0, Lib::Format, f_qualified_name),
    g(
        "format.dns1123LabelPrefix",
        0,
        Lib::Format,
        f_dns1123_label_prefix,
    ),
    g(
        "format.dns1123SubdomainPrefix",
        0,
        Lib::Format,
        f_dns1123_subdomain_prefix,
    ),
    g(
        "format.dns1035LabelPrefix",
        0,
        Lib::Format,
        f_dns1035_label_prefix,
    ),
    g("format.labelValue", 0, Lib::Format, f_label_value),
    g("format.uri", 0, Lib::Format, f_uri),
    g("format.uuid", 0, Lib::Format, f_uuid),
    g("format.byte", 0, Lib::Format, f_byte),
    g("format.date", 0, Lib::Format, f_date),
    g("format.datetime", 0, Lib::Format, f_datetime),
];

/// The Kubernetes function libraries.
pub fn libraries() -> Vec<&'static [FnDecl]> {
    vec![DECLS, super::k8s_authz::DECLS]
}

/// Type names the Kubernetes libraries declare (`type(x) == net.IP`).
pub fn named_type(libs: LibSet, name: &str) -> Option<Type> {
    let lib = match name {
        "kubernetes.Quantity" => Lib::Quantity,
        "kubernetes.Semver" => Lib::Semver,
        "net.IP" => Lib::Ip,
        "net.CIDR" => Lib::Cidr,
        "kubernetes.URL" => Lib::Urls,
        "kubernetes.NamedFormat" => Lib::Format,
        n if super::k8s_authz::is_type_name(n) => Lib::Authz,
        _ => return None,
    };
    libs.has(lib).then(|| Type::Named(name.into()))
}

// --- quantity

fn quantity<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("quantity", a, 0)?;
    Ok(wrap(QuantityValue(Quantity::parse(s).map_err(err)?)))
}

fn is_quantity<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(super::k8s::quantity::is_quantity(str_arg(
        "isQuantity",
        a,
        0,
    )?)))
}

fn q<'v>(name: &str, a: &'v [Value]) -> EvalResult<&'v Quantity> {
    opaque::<QuantityValue>(&a[0])
        .map(|q| &q.0)
        .map_or_else(|| no_overload(name, a), Ok)
}

fn q_sign<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(q("sign", a)?.sign()))
}
fn q_is_integer<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(q("isInteger", a)?.is_integer()))
}
fn q_as_integer<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(q("asInteger", a)?.as_integer().map_err(err)?))
}
fn q_as_float<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Double(
        q("asApproximateFloat", a)?.as_approximate_float(),
    ))
}

fn q_arith<'a>(name: &str, a: &[Value<'a>], sub: bool) -> EvalResult<Value<'a>> {
    let x = q(name, a)?;
    let r = match (&a[1], opaque::<QuantityValue>(&a[1])) {
        (_, Some(y)) if sub => x.sub(&y.0),
        (_, Some(y)) => x.add(&y.0),
        (Value::Int(i), None) if sub => x.sub_int(*i),
        (Value::Int(i), None) => x.add_int(*i),
        _ => return no_overload(name, a),
    };
    Ok(wrap(QuantityValue(r.map_err(err)?)))
}

fn q_add<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    q_arith("add", a, false)
}
fn q_sub<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    q_arith("sub", a, true)
}

/// Orders two quantities or two semvers.
fn order(name: &str, a: &[Value]) -> EvalResult<Ordering> {
    if let (Some(x), Some(y)) = (
        opaque::<QuantityValue>(&a[0]),
        opaque::<QuantityValue>(&a[1]),
    ) {
        return Ok(x.0.compare(&y.0));
    }
    if let (Some(x), Some(y)) = (opaque::<SemverValue>(&a[0]), opaque::<SemverValue>(&a[1])) {
        return Ok(x.0.cmp(&y.0));
    }
    no_overload(name, a)
}

fn is_less_than<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(order("isLessThan", a)? == Ordering::Less))
}
fn is_greater_than<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(order("isGreaterThan", a)? == Ordering::Greater))
}
fn compare_to<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(order("compareTo", a)? as i64))
}

// --- semver

fn normalize_arg(name: &str, a: &[Value]) -> EvalResult<bool> {
    match a.get(1) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        _ => no_overload(name, a),
    }
}

fn semver<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("semver", a, 0)?;
    let v = Semver::parse_with(s, normalize_arg("semver", a)?).map_err(err)?;
    Ok(wrap(SemverValue(v)))
}

fn is_semver<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("isSemver", a, 0)?;
    Ok(Value::Bool(super::k8s::semver::is_semver(
        s,
        normalize_arg("isSemver", a)?,
    )))
}

fn sv<'v>(name: &str, a: &'v [Value]) -> EvalResult<&'v Semver> {
    opaque::<SemverValue>(&a[0])
        .map(|v| &v.0)
        .map_or_else(|| no_overload(name, a), Ok)
}
fn sv_major<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(sv("major", a)?.major_i64()))
}
fn sv_minor<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(sv("minor", a)?.minor_i64()))
}
fn sv_patch<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(sv("patch", a)?.patch_i64()))
}

// --- ip

fn ip<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(wrap(IpValue(Ip::parse(str_arg("ip", a, 0)?).map_err(err)?)))
}
fn is_ip<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(super::k8s::net::is_ip(str_arg("isIP", a, 0)?)))
}
fn ip_is_canonical<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let s = str_arg("ip.isCanonical", a, 0)?;
    Ok(Value::Bool(
        super::k8s::net::ip_is_canonical(s).map_err(err)?,
    ))
}

fn ipv<'v>(name: &str, a: &'v [Value]) -> EvalResult<&'v Ip> {
    opaque::<IpValue>(&a[0])
        .map(|v| &v.0)
        .map_or_else(|| no_overload(name, a), Ok)
}
fn ip_family<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(ipv("family", a)?.family()))
}
fn ip_is_unspecified<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(ipv("isUnspecified", a)?.is_unspecified()))
}
fn ip_is_loopback<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(ipv("isLoopback", a)?.is_loopback()))
}
fn ip_is_llm<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(
        ipv("isLinkLocalMulticast", a)?.is_link_local_multicast(),
    ))
}
fn ip_is_llu<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(
        ipv("isLinkLocalUnicast", a)?.is_link_local_unicast(),
    ))
}
fn ip_is_global<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(ipv("isGlobalUnicast", a)?.is_global_unicast()))
}

// --- cidr

fn cidr<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(wrap(CidrValue(
        Cidr::parse(str_arg("cidr", a, 0)?).map_err(err)?,
    )))
}
fn is_cidr<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(super::k8s::net::is_cidr(str_arg(
        "isCIDR", a, 0,
    )?)))
}
fn cv<'v>(name: &str, a: &'v [Value]) -> EvalResult<&'v Cidr> {
    opaque::<CidrValue>(&a[0])
        .map(|v| &v.0)
        .map_or_else(|| no_overload(name, a), Ok)
}
fn cidr_contains_ip<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let c = cv("containsIP", a)?;
    Ok(Value::Bool(match (&a[1], opaque::<IpValue>(&a[1])) {
        (_, Some(ip)) => c.contains_ip(&ip.0),
        (Value::String(s), None) => c.contains_ip_str(s.as_str()).map_err(err)?,
        _ => return no_overload("containsIP", a),
    }))
}
fn cidr_contains_cidr<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let c = cv("containsCIDR", a)?;
    Ok(Value::Bool(match (&a[1], opaque::<CidrValue>(&a[1])) {
        (_, Some(o)) => c.contains_cidr(&o.0),
        (Value::String(s), None) => c.contains_cidr_str(s.as_str()).map_err(err)?,
        _ => return no_overload("containsCIDR", a),
    }))
}
fn cidr_ip<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(wrap(IpValue(cv("ip", a)?.ip())))
}
fn cidr_masked<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(wrap(CidrValue(cv("masked", a)?.masked())))
}
fn cidr_prefix_length<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Int(cv("prefixLength", a)?.prefix_length()))
}

// --- url

fn url<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(wrap(UrlValue(
        Url::parse(str_arg("url", a, 0)?).map_err(err)?,
    )))
}
fn is_url<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(super::k8s::url::is_url(str_arg(
        "isURL", a, 0,
    )?)))
}
fn uv<'v>(name: &str, a: &'v [Value]) -> EvalResult<&'v Url> {
    opaque::<UrlValue>(&a[0])
        .map(|v| &v.0)
        .map_or_else(|| no_overload(name, a), Ok)
}
fn url_scheme<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(uv("getScheme", a)?.scheme()))
}
fn url_host<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(uv("getHost", a)?.host()))
}
fn url_hostname<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(uv("getHostname", a)?.hostname()))
}
fn url_port<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(uv("getPort", a)?.port()))
}
fn url_path<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(uv("getEscapedPath", a)?.escaped_path()))
}
fn url_query<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let q = uv("getQuery", a)?.query();
    let m = q
        .into_iter()
        .map(|(k, v)| {
            (
                Key::String(Str::Shared(k.into())),
                Value::list(v.into_iter().map(Value::string).collect()),
            )
        })
        .collect();
    Ok(Value::map(m))
}

// --- named formats

fn format_named<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let name = str_arg("format.named", a, 0)?;
    Ok(Value::optional(
        NamedFormat::named(name).map(|f| wrap(FormatValue(f))),
    ))
}

fn format_validate<'a>(_: &mut Ctx<'a, '_>, a: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let f = opaque::<FormatValue>(&a[0]).map_or_else(|| no_overload("validate", a), Ok)?;
    let s = str_arg("validate", a, 1)?;
    Ok(Value::optional(f.0.validate(s).map(|errs| {
        Value::list(errs.into_iter().map(Value::string).collect())
    })))
}

macro_rules! named_formats {
    ($($f:ident => $v:ident),* $(,)?) => {
        $(fn $f<'a>(_: &mut Ctx<'a, '_>, _: &[Value<'a>]) -> EvalResult<Value<'a>> {
            Ok(wrap(FormatValue(NamedFormat::$v)))
        })*
    };
}

named_formats!(
    f_dns1123_label => Dns1123Label,
    f_dns1123_subdomain => Dns1123Subdomain,
    f_dns1035_label => Dns1035Label,
    f_qualified_name => QualifiedName,
    f_dns1123_label_prefix => Dns1123LabelPrefix,
    f_dns1123_subdomain_prefix => Dns1123SubdomainPrefix,
    f_dns1035_label_prefix => Dns1035LabelPrefix,
    f_label_value => LabelValue,
    f_uri => Uri,
    f_uuid => Uuid,
    f_byte => Byte,
    f_date => Date,
    f_datetime => Datetime,
);
