//! Policy texts and helpers shared by the unit tests of several modules.

use crate::cel::interrupt::Interrupt;
use crate::cel::k8s_authz::{Attributes, Authorizer, Decision, UserInfo};
use crate::inventory::Inventory;
use crate::policy::PolicySet;
use std::sync::{Arc, Mutex};

/// A MutatingAdmissionPolicy (and binding) that labels every ConfigMap
/// `owner: platform`.
pub const ADD_OWNER_MAP: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-owner}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: \"Object{metadata: Object.metadata{labels: {'owner': 'platform'}}}\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: add-owner}
spec: {policyName: add-owner}
";

/// Ingress hosts unique in the cluster, through a declared index.
pub const UNIQUE_HOST: &str = "
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: unique-host}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE, UPDATE]}
  indexes:
    - {name: hosts, apiVersion: networking.k8s.io/v1, kind: Ingress, keys: 'object.spec.rules.map(r, r.host)'}
  validations:
    - expression: \"object.spec.rules.all(r, inventory.index('hosts', r.host).size() == 0)\"
      messageExpression: \"'host taken by ' + object.spec.rules.map(r, inventory.index('hosts', r.host).map(o, o.metadata.namespace + '/' + o.metadata.name)).flatten().join(', ')\"
";

/// Ingress TLS secrets unique in the cluster, through a second index.
pub const UNIQUE_TLS: &str = "
apiVersion: interlock.dev/v1alpha1
kind: InterlockPolicy
metadata: {name: unique-tls}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE]}
  indexes:
    - {name: tls, apiVersion: networking.k8s.io/v1, kind: Ingress, keys: \"object.spec.?tls.orValue([]).map(t, t.secretName)\"}
  validations:
    - expression: \"object.spec.?tls.orValue([]).all(t, inventory.index('tls', t.secretName).size() == 0)\"
";

/// Compiles policy texts, declaring their indexes in `inventory`.
pub fn compile(texts: &[&str], inventory: &mut Inventory) -> PolicySet {
    let docs: Vec<_> = texts
        .iter()
        .flat_map(|t| {
            crate::manifest::load_str(
                crate::manifest::Source::file("p.yaml"),
                t,
                crate::manifest::Format::Yaml,
                &Default::default(),
            )
            .documents
        })
        .collect();
    let (set, errors) = PolicySet::compile_documents(docs);
    assert!(errors.is_empty(), "{errors:?}");
    inventory
        .set_indexes(&set.index_decls())
        .expect("the declarations compiled");
    set
}

/// An Ingress with one host and one TLS secret.
pub fn ingress(ns: &str, name: &str, host: &str, secret: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"tls": [{"secretName": secret}], "rules": [{"host": host}]}})
}

/// An authorizer that answers from a fixed decision and records every
/// question; with no decision, sets `deadline` as if it passed while it
/// waited.
#[derive(Debug, Default)]
pub struct FakeAuthorizer {
    pub answer: Option<Decision>,
    pub asked: Mutex<Vec<(UserInfo, Attributes)>>,
    pub deadline: Option<Arc<Interrupt>>,
}

impl Authorizer for FakeAuthorizer {
    fn authorize(
        &self,
        user: &UserInfo,
        attributes: &Attributes,
        _: Option<&Interrupt>,
    ) -> Option<Decision> {
        self.asked
            .lock()
            .unwrap()
            .push((user.clone(), attributes.clone()));
        if let Some(d) = &self.deadline {
            d.cancel();
        }
        self.answer.clone()
    }
}
