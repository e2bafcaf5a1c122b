use super::*;
use crate::policy::Action;

use crate::fixtures::{compile, ingress, FakeAuthorizer};
use crate::policy::redact;

#[test]
fn members_are_judged_against_the_inventory_with_the_group_in_place() {
    let mut inv = Inventory::new();
    let policies = compile(&[crate::fixtures::UNIQUE_HOST], &mut inv);
    // The group owns `web` (host a), another tenant has `other` (host b).
    inv.upsert(&ingress("t", "web", "a.example", "s"), None)
        .expect("store");
    inv.upsert(&ingress("u", "other", "b.example", "s"), None)
        .expect("store");
    let writer = Writer {
        namespace: "t",
        service_account: "deployer",
    };
    let current = vec![ObjectKey::of(&ingress("t", "web", "", "s")).expect("key")];

    // Renaming `web` to `site` with the same host: the old member is
    // replaced, so its host is free.
    let desired = vec![ingress("t", "site", "a.example", "s")];
    let no_verdict = validate(&policies, &inv, &writer, None, &current, &desired);
    assert!(no_verdict.verdicts.is_empty());

    // Two members claiming one host conflict with each other.
    let desired = vec![
        ingress("t", "x", "c.example", "s"),
        ingress("t", "y", "c.example", "s"),
    ];
    let v = validate(&policies, &inv, &writer, None, &current, &desired).verdicts;
    assert_eq!(v.iter().map(|v| v.member).collect::<Vec<_>>(), vec![0, 1]);

    // Another tenant's host is taken, as a write by the ServiceAccount.
    let desired = vec![ingress("t", "web", "b.example", "s")];
    let v = validate(&policies, &inv, &writer, None, &current, &desired).verdicts;
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].verdict.action, Action::Deny);
    assert_eq!(v[0].verdict.message, "host taken by u/other");
    assert_eq!(writer.username(), "system:serviceaccount:t:deployer");
    assert_eq!(
        redact(&v[0].verdict.message, &v[0].verdict.related, "t"),
        "host taken by Ingress in another namespace"
    );
}

/// Only a writer whose ServiceAccount may read the namespace's Secrets
/// may write Ingresses, and only what its apply may create.
const READS_SECRETS: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: reads-secrets}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE, UPDATE]}
  validations:
    - expression: \"authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed()\"
      message: may not read Secrets
    - expression: \"authorizer.requestResource.check('create').allowed()\"
      message: may not create it
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: reads-secrets}
spec: {policyName: reads-secrets, validationActions: [Deny]}
";

fn fake(answer: Option<Decision>) -> Arc<FakeAuthorizer> {
    Arc::new(FakeAuthorizer {
        answer,
        ..FakeAuthorizer::default()
    })
}

fn spec(sa: &str) -> ResourceGroupSpec {
    serde_json::from_value(serde_json::json!({
        "serviceAccountName": sa,
        "resources": [ingress("t", "web", "a.example", "s")],
    }))
    .expect("spec")
}

fn findings(authorizer: &Arc<FakeAuthorizer>) -> Vec<GroupFinding> {
    let mut inv = Inventory::new();
    let policies = compile(&[READS_SECRETS], &mut inv);
    let a: Arc<dyn Authorizer> = authorizer.clone();
    spec_findings(
        &policies,
        &inv,
        "t",
        &spec("deployer"),
        Some(&a),
        &[],
        &crate::group::BuiltinScopes,
        false,
    )
}

#[test]
fn checks_ask_about_the_service_account_as_kube_apiserver_impersonates_it() {
    let allowed = Decision {
        allowed: true,
        ..Decision::default()
    };
    let a = fake(Some(allowed));
    assert_eq!(findings(&a), vec![]);
    let asked = a.asked.lock().unwrap().clone();
    let user = UserInfo {
        username: "system:serviceaccount:t:deployer".into(),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:t".into(),
            "system:authenticated".into(),
        ],
        extra: Default::default(),
    };
    assert_eq!(
        Writer {
            namespace: "t",
            service_account: "deployer"
        }
        .user(),
        user
    );
    let questions: Vec<String> = asked
        .iter()
        .map(|(u, q)| {
            assert_eq!(u, &user);
            q.describe()
        })
        .collect();
    assert_eq!(
        questions,
        [
            "'get' on resource 'secrets' of group '', namespace 't'",
            "'create' on resource 'ingresses' of group 'networking.k8s.io', namespace 't', name 'web'",
        ]
    );
}

#[test]
fn a_denied_check_is_the_policys_verdict_an_unanswered_one_refuses_the_group() {
    let f = findings(&fake(Some(Decision::default())));
    let messages: Vec<_> = f
        .iter()
        .map(|f| (f.policy.as_str(), f.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        [
            ("reads-secrets", "may not read Secrets"),
            ("reads-secrets", "may not create it")
        ]
    );
    // kube-apiserver's authorizer errored: each question once, on its
    // member, whatever the expression made of the answer.
    let errored = Decision {
        error: Some("webhook authorizer down".into()),
        ..Decision::default()
    };
    let f = findings(&fake(Some(errored)));
    let unanswered: Vec<_> = f.iter().filter(|f| f.policy == AUTHORIZER).collect();
    assert_eq!(unanswered.len(), 2, "{f:?}");
    assert_eq!(unanswered[0].action, FindingAction::Deny);
    assert_eq!(unanswered[0].object.name, "web");
    assert_eq!(
        unanswered[0].message,
        "no answer from kube-apiserver's authorizer whether system:serviceaccount:t:deployer may 'get' on resource 'secrets' of group '', namespace 't': webhook authorizer down; nothing is applied until it answers"
    );
    // Stopped by the deadline before an answer came.
    let f = findings(&fake(None));
    assert!(
        f.iter().any(|f| f.policy == AUTHORIZER
            && f.message.ends_with(
                "the validation's deadline passed first; nothing is applied until it answers"
            )),
        "{f:?}"
    );
}

#[test]
fn redaction_hides_a_name_whose_prefix_is_another_hidden_name() {
    let key = |ns: &str, name: &str| ObjectKey::of(&ingress(ns, name, "h", "s")).expect("key");
    let related = [key("u", "web"), key("u", "web-admin")];
    let out = redact("taken by u/web-admin and u/web", &related, "t");
    assert_eq!(
        out,
        "taken by Ingress in another namespace and Ingress in another namespace"
    );
    assert_eq!(
        redact("mine: t/web", &[key("t", "web")], "t"),
        "mine: t/web"
    );
}
