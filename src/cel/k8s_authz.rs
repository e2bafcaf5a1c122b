//! Kubernetes' authorizer library (`apiserver/pkg/cel/library/authz.go`):
//! `authorizer.group(g).resource(r)...check(verb).allowed()`,
//! `authorizer.path(p).check(verb)`, `serviceAccount(ns, name)`,
//! `fieldSelector`/`labelSelector`, and `authorizer.requestResource`.
//!
//! The builders are evaluated as kube-apiserver does (with its argument
//! validation). `check` needs an authorizer to ask, and Interlock has none:
//! it is an evaluation error that names the check, so a policy that relies
//! on it fails (or is ignored, under `failurePolicy: Ignore`) visibly rather
//! than answering on a guess.

use super::error::{EvalError, EvalResult};
use super::functions::{no_overload, str_arg, FnDecl, Imp, Lib};
use super::k8s::format::NamedFormat;
use super::program::Ctx;
use super::value::{Json, Opaque, Value};
use std::any::Any;
use std::sync::Arc;

pub const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
pub const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
pub const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
pub const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
pub const DECISION: &str = "kubernetes.authorization.Decision";

/// A value of the library: an authorizer (possibly impersonating a service
/// account) or a check being built on one.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Authz {
    #[default]
    Authorizer,
    ServiceAccount {
        namespace: String,
        name: String,
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
            Authz::Authorizer | Authz::ServiceAccount { .. } => AUTHORIZER,
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

/// The `authorizer` variable.
pub fn authorizer<'a>() -> Value<'a> {
    Value::Opaque(Arc::new(Authz::Authorizer))
}

/// The `authorizer.requestResource` variable: a check on the request's own
/// resource, as kube-apiserver's `NewResourceAuthorizerVal` builds it.
pub fn request_resource<'a>(
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Value<'a> {
    Value::Opaque(Arc::new(Authz::Resource(Box::new(ResourceCheck {
        user: Authz::Authorizer,
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
        Some(a @ (Authz::Authorizer | Authz::ServiceAccount { .. })) => Ok(a),
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
    user("serviceAccount", args)?;
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

/// Offline there is no authorizer to ask: the check fails, naming what it
/// would have asked.
fn check<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    let verb = str_arg("check", args, 1)?;
    let what = match arg(args, 0) {
        Some(Authz::Path { path, .. }) => format!("path '{path}'"),
        Some(Authz::Resource(c)) => {
            let mut what = format!("resource '{}' of group '{}'", c.resource, c.group);
            if !c.subresource.is_empty() {
                what += &format!(", subresource '{}'", c.subresource);
            }
            if !c.namespace.is_empty() {
                what += &format!(", namespace '{}'", c.namespace);
            }
            if !c.name.is_empty() {
                what += &format!(", name '{}'", c.name);
            }
            what
        }
        _ => return no_overload("check", args),
    };
    Err(EvalError::new(format!(
        "authorizer unavailable: Interlock has no authorizer to ask whether '{verb}' on {what} is allowed"
    )))
}

/// `allowed`, `reason`, `errored` and `error` take a decision, which only
/// `check` makes; without an authorizer no decision ever exists.
fn decision<'a>(_: &mut Ctx<'a, '_>, args: &[Value<'a>]) -> EvalResult<Value<'a>> {
    no_overload("decision", args)
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
    m("allowed", 1, decision),
    m("reason", 1, decision),
    m("errored", 1, decision),
    m("error", 1, decision),
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
mod tests {
    use crate::cel::{Activation, Env, Ty};

    fn eval(src: &str) -> Result<serde_json::Value, String> {
        let mut env = Env::kubernetes();
        let a = env.add_typed_variable("authorizer", Ty::Named(super::AUTHORIZER.into()));
        let r = env.add_typed_variable(
            "authorizer.requestResource",
            Ty::Named(super::RESOURCE_CHECK.into()),
        );
        let program = env.compile(src).map_err(|e| format!("compile: {e}"))?;
        let mut act = Activation::new(&env);
        act.set(a, super::authorizer());
        act.set(
            r,
            super::request_resource("apps", "deployments", "", "ns", "web"),
        );
        program
            .eval(&act)
            .map(|v| v.to_json())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_check_without_an_authorizer_is_an_error_naming_it() {
        let err =
            eval("authorizer.group('').resource('pods').namespace('a').check('get').allowed()")
                .unwrap_err();
        assert_eq!(
            err,
            "authorizer unavailable: Interlock has no authorizer to ask whether 'get' on resource 'pods' of group '', namespace 'a' is allowed"
        );
        let err =
            eval("authorizer.requestResource.subresource('scale').check('update').reason() == ''")
                .unwrap_err();
        assert!(
            err.contains("'update' on resource 'deployments' of group 'apps', subresource 'scale', namespace 'ns', name 'web'"),
            "{err}"
        );
        let err = eval("authorizer.path('/healthz').check('get').errored()").unwrap_err();
        assert!(err.contains("'get' on path '/healthz'"), "{err}");
    }

    #[test]
    fn builders_validate_their_arguments_as_kube_apiserver() {
        for (src, want) in [
            (
                "authorizer.path(' ').check('get').allowed()",
                "path must not be empty",
            ),
            (
                "authorizer.group('').resource('').check('get').allowed()",
                "resource must not be empty",
            ),
            (
                "authorizer.serviceAccount('ns', 'Bad_Name').path('/x').check('get').allowed()",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('a.b', 'sa').path('/x').check('get').allowed()",
                "Invalid service account namespace",
            ),
        ] {
            assert_eq!(eval(src).unwrap_err(), want, "{src}");
        }
        assert_eq!(
            eval("authorizer.requestResource.fieldSelector('a=b') == authorizer.requestResource.fieldSelector('a=b')"),
            Ok(serde_json::json!(true))
        );
    }

    #[test]
    fn the_checker_types_every_call() {
        let err = eval("authorizer.group('').check('get').allowed()").unwrap_err();
        assert!(
            err.contains("found no matching overload for 'check' applied to 'kubernetes.authorization.GroupCheck.(string)'"),
            "{err}"
        );
    }
}
