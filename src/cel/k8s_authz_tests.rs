use super::{Attributes, Authority, Decision, UserInfo};
use crate::cel::interrupt::Interrupt;
use crate::cel::{Activation, Env, Ty};
use crate::fixtures::FakeAuthorizer;
use std::sync::Arc;

/// What an expression comes to: its value, or its error text (a compile
/// error's prefixed `compile: `); both are what these cases compare.
#[derive(Debug, PartialEq)]
enum Answer {
    Value(serde_json::Value),
    Error(String),
}

impl Answer {
    fn unwrap_err(self) -> String {
        match self {
            Answer::Error(e) => e,
            Answer::Value(v) => panic!("expected an error, got {v}"),
        }
    }
}

fn eval(src: &str) -> Answer {
    eval_with(src, None)
}

fn eval_with(src: &str, authority: Option<Arc<Authority>>) -> Answer {
    eval_under(src, authority, Interrupt::new())
}

fn eval_under(src: &str, authority: Option<Arc<Authority>>, interrupt: Arc<Interrupt>) -> Answer {
    let mut env = Env::kubernetes();
    let a = env.add_typed_variable("authorizer", Ty::Named(super::AUTHORIZER.into()));
    let r = env.add_typed_variable(
        "authorizer.requestResource",
        Ty::Named(super::RESOURCE_CHECK.into()),
    );
    let program = match env.compile(src) {
        Ok(p) => p,
        Err(e) => return Answer::Error(format!("compile: {e}")),
    };
    let mut act = Activation::new(&env).with_interrupt(interrupt);
    act.set(a, super::authorizer(authority.clone()));
    act.set(
        r,
        super::request_resource(authority, "apps", "deployments", "", "ns", "web"),
    );
    match program.eval(&act) {
        Ok(v) => Answer::Value(v.to_json()),
        Err(e) => Answer::Error(e.to_string()),
    }
}

fn alice() -> UserInfo {
    UserInfo {
        username: "alice".into(),
        uid: "u-1".into(),
        groups: vec!["devs".into(), "system:authenticated".into()],
        extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
    }
}

fn authority(fake: &Arc<FakeAuthorizer>) -> Option<Arc<Authority>> {
    Some(Arc::new(Authority {
        authorizer: fake.clone(),
        user: alice(),
    }))
}

#[test]
fn a_check_asks_the_authorizer_for_the_user_and_reads_its_decision() {
    let fake = Arc::new(FakeAuthorizer {
        answer: Some(Decision {
            allowed: true,
            reason: "RBAC: allowed".into(),
            error: None,
        }),
        ..FakeAuthorizer::default()
    });
    let got = eval_with(
        "[authorizer.group('').resource('secrets').namespace('a').name('s').check('get')].map(d, \
             [d.allowed(), d.reason() == 'RBAC: allowed', !d.errored(), d.error() == ''])",
        authority(&fake),
    );
    assert_eq!(
        got,
        Answer::Value(serde_json::json!([[true, true, true, true]]))
    );
    let asked = fake.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, alice());
    assert_eq!(
        asked[0].1,
        Attributes::Resource {
            group: "".into(),
            resource: "secrets".into(),
            subresource: "".into(),
            namespace: "a".into(),
            name: "s".into(),
            verb: "get".into(),
            field_selector: "".into(),
            label_selector: "".into(),
        }
    );
}

#[test]
fn service_accounts_paths_selectors_and_the_request_resource_are_asked_as_kube_asks() {
    let fake = Arc::new(FakeAuthorizer {
        answer: Some(Decision {
            allowed: false,
            reason: "".into(),
            error: Some("webhook down".into()),
        }),
        ..FakeAuthorizer::default()
    });
    let got = eval_with(
        "[authorizer.serviceAccount('team-a', 'builder').path('/healthz').check('get'), \
              authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n').labelSelector('app=x').check('list')] \
             .all(d, !d.allowed() && d.errored() && d.error() == 'webhook down')",
        authority(&fake),
    );
    assert_eq!(got, Answer::Value(serde_json::json!(true)));
    // A third check would be over one expression's budget.
    let got = eval_with(
        "authorizer.requestResource.subresource('scale').check('update').allowed()",
        authority(&fake),
    );
    assert_eq!(got, Answer::Value(serde_json::json!(false)));
    let asked = fake.asked.lock().unwrap().clone();
    assert_eq!(
        asked[0].0,
        UserInfo {
            username: "system:serviceaccount:team-a:builder".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:team-a".into()
            ],
            ..UserInfo::default()
        }
    );
    assert_eq!(
        asked[0].1,
        Attributes::Path {
            path: "/healthz".into(),
            verb: "get".into()
        }
    );
    let Attributes::Resource {
        field_selector,
        label_selector,
        ..
    } = &asked[1].1
    else {
        panic!("{asked:?}")
    };
    assert_eq!(
        (field_selector.as_str(), label_selector.as_str()),
        ("spec.nodeName=n", "app=x")
    );
    assert_eq!(asked[1].0, alice());
    let Attributes::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
        verb,
        ..
    } = &asked[2].1
    else {
        panic!("{asked:?}")
    };
    assert_eq!(
        [group, resource, subresource, namespace, name, verb],
        ["apps", "deployments", "scale", "ns", "web", "update"]
    );
}

#[test]
fn a_check_costs_what_cel_go_charges_two_fit_in_an_expression() {
    let fake = Arc::new(FakeAuthorizer {
        answer: Some(Decision::default()),
        ..FakeAuthorizer::default()
    });
    let check = "authorizer.path('/x').check('get').allowed()";
    let two = format!("{check} || {check}");
    assert_eq!(
        eval_with(&two, authority(&fake)),
        Answer::Value(serde_json::json!(false))
    );
    let three = format!("{check} || {check} || {check}");
    assert_eq!(
        eval_with(&three, authority(&fake)),
        Answer::Error("operation cancelled: actual cost limit exceeded".into())
    );
    // The third is refused before it is asked.
    assert_eq!(fake.asked.lock().unwrap().len(), 4);
}

#[test]
fn an_authorizer_stopped_by_the_interrupt_stops_the_evaluation() {
    let deadline = Interrupt::new();
    let fake = Arc::new(FakeAuthorizer {
        deadline: Some(deadline.clone()),
        ..FakeAuthorizer::default()
    });
    // `|| true` would absorb an ordinary error, not an interruption.
    let err = eval_under(
        "authorizer.path('/x').check('get').errored() || true",
        authority(&fake),
        deadline.clone(),
    )
    .unwrap_err();
    assert_eq!(err, "operation interrupted");
    assert_eq!(deadline.stats().interrupted, 1);
}

#[test]
fn a_check_without_an_authorizer_is_an_error_naming_it() {
    let err = eval("authorizer.group('').resource('pods').namespace('a').check('get').allowed()")
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
    let err =
        eval("authorizer.serviceAccount('a', 'b').path('/x').check('get').errored()").unwrap_err();
    assert!(err.starts_with("authorizer unavailable"), "{err}");
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
        Answer::Value(serde_json::json!(true))
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
