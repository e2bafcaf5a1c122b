//! Kubernetes' authorizer library (`apiserver/pkg/cel/library/authz.go`):
//! `authorizer.group(g).resource(r)...check(verb).allowed()`,
//! `authorizer.path(p).check(verb)`, `serviceAccount(ns, name)`,
//! `fieldSelector`/`labelSelector`, and `authorizer.requestResource`.
//!
//! The builders are evaluated as kube-apiserver does (with its argument
//! validation). `check` asks the [`Authorizer`] the `authorizer` value
//! carries (`serve` and the controller bind one that asks kube-apiserver,
//! see `crate::cluster::authz`), for the request's user (the controller's:
//! a group's ServiceAccount) or a service account, and charges what cel-go
//! charges for it (350,000: two checks fit in one expression's budget).
//! Without one (offline: `check`, `test`, `eval`; audits) it is an
//! evaluation error that names the question, so a policy that relies on it
//! fails (or is ignored, under `failurePolicy: Ignore`) visibly rather than
//! answering on a guess.

use super::error::{EvalError, EvalResult};
use super::functions::{no_overload, str_arg, FnDecl, Imp, Lib};
use super::interrupt::Interrupt;
use super::k8s::format::NamedFormat;
use super::program::Ctx;
use super::value::{Json, Opaque, Value};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
pub const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
pub const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
pub const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
pub const DECISION: &str = "kubernetes.authorization.Decision";

/// cel-go's cost of one `check` in kube-apiserver's cost model
/// (`library/cost.go`), whatever it asks.
pub const CHECK_COST: u64 = 350_000;

/// A user as kube-apiserver's authorizer sees one (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user of a service account, as `serviceaccount.ServiceAccountInfo`
    /// makes it (no uid, no `system:authenticated`).
    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        UserInfo {
            username: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            ..UserInfo::default()
        }
    }
}

/// What one `check` asks about (kube's `AttributesRecord`; the version is
/// always every version, `*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes {
    Path {
        path: String,
        verb: String,
    },
    Resource {
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
        verb: String,
        /// As written; empty when not set.
        field_selector: String,
        label_selector: String,
    },
}

/// An authorizer's answer, as `allowed()`, `reason()`, `errored()` and
/// `error()` read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
    /// The authorizer's evaluation error (`errored()` is whether there is one).
    pub error: Option<String>,
}

impl Opaque for Decision {
    fn type_name(&self) -> &'static str {
        DECISION
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().downcast_ref::<Decision>() == Some(self)
    }
    fn to_json(&self) -> Json {
        Json::String(DECISION.to_string())
    }
}

/// Answers `check`: kube-apiserver's authorizer, asked from outside.
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// Whether `user` may do what `attributes` say. `None` only when
    /// `interrupt` was set before the answer came: the evaluation stops.
    /// A failure to ask is a decision with an error (`errored()`), as
    /// kube-apiserver's authorizers report theirs.
    fn authorize(
        &self,
        user: &UserInfo,
        attributes: &Attributes,
        interrupt: Option<&Interrupt>,
    ) -> Option<Decision>;
}

/// The request's user and whom to ask about it: what the `authorizer`
/// variable carries under `serve`.
#[derive(Debug, Clone)]
pub struct Authority {
    pub authorizer: Arc<dyn Authorizer>,
    pub user: UserInfo,
}

impl PartialEq for Authority {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorizer, &other.authorizer) && self.user == other.user
    }
}

/// A value of the library: an authorizer (possibly impersonating a service
/// account) or a check being built on one. `None` as authority: nobody to
/// ask (offline).
#[derive(Debug, Clone, PartialEq)]
pub enum Authz {
    Authorizer(Option<Arc<Authority>>),
    ServiceAccount {
        namespace: String,
        name: String,
        authority: Option<Arc<Authority>>,
    },
    Path {
        user: Box<Authz>,
        path: String,
    },
    Group {
        user: Box<Authz>,
        group: String,
    },
    Resource(Box<ResourceCheck>),
}

impl Default for Authz {
    fn default() -> Self {
        Authz::Authorizer(None)
    }
}

impl Authz {
    /// Whom `check` asks and about which user; `None` offline.
    fn asker(&self) -> Option<(&Arc<dyn Authorizer>, UserInfo)> {
        match self {
            Authz::Authorizer(Some(a)) => Some((&a.authorizer, a.user.clone())),
            Authz::ServiceAccount {
                namespace,
                name,
                authority: Some(a),
            } => Some((&a.authorizer, UserInfo::service_account(namespace, name))),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceCheck {
    user: Authz,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    field_selector: String,
    label_selector: String,
}

impl Opaque for Authz {
    fn type_name(&self) -> &'static str {
        match self {
            Authz::Authorizer(_) | Authz::ServiceAccount { .. } => AUTHORIZER,
            Authz::Path { .. } => PATH_CHECK,
            Authz::Group { .. } => GROUP_CHECK,
            Authz::Resource(_) => RESOURCE_CHECK,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        other.as_any().downcast_ref::<Authz>() == Some(self)
    }
    fn to_json(&self) -> Json {
        Json::String(self.type_name().to_string())
    }
}

/// The `authorizer` variable, asking `authority` (none offline).
pub fn authorizer<'a>(authority: Option<Arc<Authority>>) -> Value<'a> {
    Value::Opaque(Arc::new(Authz::Authorizer(authority)))
}

/// The `authorizer.requestResource` variable: a check on the request's own
/// resource, as kube-apiserver's `NewResourceAuthorizerVal` builds it.
pub fn request_resource<'a>(
    authority: Option<Arc<Authority>>,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Value<'a> {
    Value::Opaque(Arc::new(Authz::Resource(Box::new(ResourceCheck {
        user: Authz::Authorizer(authority),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..ResourceCheck::default()
    }))))
}

fn arg<'v>(args: &'v [Value], i: usize) -> Option<&'v Authz> {
    match args.get(i) {
        Some(Value::Opaque(o)) => o.as_any().downcast_ref::<Authz>(),
        _ => None,
    }
}

fn wrap<'a>(a: Authz) -> EvalResult<Value<'a>> {
    Ok(Value::Opaque(Arc::new(a)))
}

fn user<'v>(name: &str, args: &'v [Value]) -> EvalResult<&'v Authz> {
    match arg(args, 0) {
        Some(a @ (Authz::Authorizer(_) | Authz::ServiceAccount { .. })) => Ok(a),
        _ => no_overload(name, args),
    }
}

fn path<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let user = user("path", args)?.clone();
    let path = str_arg("path", args, 1)?;
    if path.trim().is_empty() {
        return Err(EvalError::new("path must not be empty"));
    }
    wrap(Authz::Path {
        user: Box::new(user),
        path: path.into(),
    })
}

fn group<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let user = user("group", args)?.clone();
    let group = str_arg("group", args, 1)?;
    wrap(Authz::Group {
        user: Box::new(user),
        group: group.into(),
    })
}

fn service_account<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let authority = match user("serviceAccount", args)? {
        Authz::Authorizer(a) | Authz::ServiceAccount { authority: a, .. } => a.clone(),
        _ => None,
    };
    let namespace = str_arg("serviceAccount", args, 1)?;
    let name = str_arg("serviceAccount", args, 2)?;
    if NamedFormat::Dns1123Subdomain.validate(name).is_some() {
        return Err(EvalError::new("Invalid service account name"));
    }
    if NamedFormat::Dns1123Label.validate(namespace).is_some() {
        return Err(EvalError::new("Invalid service account namespace"));
    }
    wrap(Authz::ServiceAccount {
        namespace: namespace.into(),
        name: name.into(),
        authority,
    })
}

fn resource<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let Some(Authz::Group { user, group }) = arg(args, 0) else {
        return no_overload("resource", args);
    };
    let resource = str_arg("resource", args, 1)?;
    if resource.trim().is_empty() {
        return Err(EvalError::new("resource must not be empty"));
    }
    wrap(Authz::Resource(Box::new(ResourceCheck {
        user: (**user).clone(),
        group: group.clone(),
        resource: resource.into(),
        ..ResourceCheck::default()
    })))
}

/// `subresource`, `namespace`, `name`, `fieldSelector`, `labelSelector`:
/// a copy of the check with one attribute set.
fn with_attribute<'a>(
    name: &str,
    args: &[Value<'a>],
    set: fn(&mut ResourceCheck, &str),
) -> EvalResult<Value<'a>> {
    let Some(Authz::Resource(check)) = arg(args, 0) else {
        return no_overload(name, args);
    };
    let value = str_arg(name, args, 1)?;
    let mut check = check.clone();
    set(&mut check, value);
    wrap(Authz::Resource(check))
}

macro_rules! attribute {
    ($fn:ident, $name:literal, $field:ident) => {
        fn $fn<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
            with_attribute($name, args, |c, v| c.$field = v.into())
        }
    };
}

attribute!(subresource, "subresource", subresource);
attribute!(namespace, "namespace", namespace);
attribute!(name, "name", name);
attribute!(field_selector, "fieldSelector", field_selector);
attribute!(label_selector, "labelSelector", label_selector);

/// Asks the authorizer the check's user carries; offline there is none,
/// and the check fails naming what it would have asked.
fn check<'a>(ctx: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let verb = str_arg("check", args, 1)?;
    let (user, attributes) = match arg(args, 0) {
        Some(Authz::Path { user, path }) => (
            &**user,
            Attributes::Path {
                path: path.clone(),
                verb: verb.into(),
            },
        ),
        Some(Authz::Resource(c)) => (&c.user, c.attributes(verb)),
        _ => return no_overload("check", args),
    };
    // Every call was charged one unit already.
    ctx.charge(CHECK_COST - 1)?;
    let Some((authorizer, user)) = user.asker() else {
        return Err(unavailable(&attributes));
    };
    match authorizer.authorize(&user, &attributes, ctx.interrupt()) {
        Some(decision) => Ok(Value::Opaque(Arc::new(decision))),
        // The interrupt is set: charging fails with its error.
        None => ctx.charge(0).and(Err(EvalError::interrupted())),
    }
}

impl ResourceCheck {
    fn attributes(&self, verb: &str) -> Attributes {
        Attributes::Resource {
            group: self.group.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            verb: verb.into(),
            field_selector: self.field_selector.clone(),
            label_selector: self.label_selector.clone(),
        }
    }
}

/// The offline error: names the question nobody can answer.
fn unavailable(attributes: &Attributes) -> EvalError {
    EvalError::new(format!(
        "{UNAVAILABLE}Interlock has no authorizer to ask whether {} is allowed",
        attributes.describe()
    ))
}

/// How the offline error begins: what tells it from other evaluation
/// errors (the audit reports such a result as not evaluable).
pub const UNAVAILABLE: &str = "authorizer unavailable: ";

impl Attributes {
    /// The question in words: `'get' on resource 'pods' of group '',
    /// namespace 'a'`, or `'get' on path '/healthz'`.
    pub fn describe(&self) -> String {
        match self {
            Attributes::Path { path, verb } => format!("'{verb}' on path '{path}'"),
            Attributes::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
                verb,
                ..
            } => {
                let mut what = format!("'{verb}' on resource '{resource}' of group '{group}'");
                for (label, value) in [
                    ("subresource", subresource),
                    ("namespace", namespace),
                    ("name", name),
                ] {
                    if !value.is_empty() {
                        what += &format!(", {label} '{value}'");
                    }
                }
                what
            }
        }
    }
}

fn the_decision<'v>(name: &str, args: &'v [Value]) -> EvalResult<&'v Decision> {
    match args.first() {
        Some(Value::Opaque(o)) => match o.as_any().downcast_ref::<Decision>() {
            Some(d) => Ok(d),
            None => no_overload(name, args),
        },
        _ => no_overload(name, args),
    }
}

fn allowed<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(the_decision("allowed", args)?.allowed))
}

fn reason<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::string(the_decision("reason", args)?.reason.as_str()))
}

fn errored<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    Ok(Value::Bool(the_decision("errored", args)?.error.is_some()))
}

fn error<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let d = the_decision("error", args)?;
    Ok(Value::string(d.error.as_deref().unwrap_or("")))
}

const fn m(name: &'static str, n: usize, imp: Imp) -> FnDecl {
    FnDecl::member(name, n, Lib::Authz, imp)
}

pub static DECLS: &[FnDecl] = &[
    m("path", 2, path),
    m("group", 2, group),
    m("serviceAccount", 3, service_account),
    m("resource", 2, resource),
    m("subresource", 2, subresource),
    m("namespace", 2, namespace),
    m("name", 2, name),
    m("fieldSelector", 2, field_selector),
    m("labelSelector", 2, label_selector),
    m("check", 2, check),
    m("allowed", 1, allowed),
    m("reason", 1, reason),
    m("errored", 1, errored),
    m("error", 1, error),
];

/// The library's type names (`type(authorizer)`).
pub fn is_type_name(name: &str) -> bool {
    [
        AUTHORIZER,
        PATH_CHECK,
        GROUP_CHECK,
        RESOURCE_CHECK,
        DECISION,
    ]
    .contains(&name)
}

#[cfg(test)]
#[path = "k8s_authz_tests.rs"]
mod tests;
