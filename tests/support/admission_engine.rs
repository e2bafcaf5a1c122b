//! The engine the AdmissionReview robustness test and fuzz target answer
//! with: the bundled policies over a small inventory in namespace `a`.

use interlock::admission::{Engine, EngineOptions};
use interlock::inventory::Inventory;
use interlock::policy::PolicySet;
use serde_json::json;

pub fn engine() -> Engine {
    let loaded = interlock::bundled::documents();
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut inv = Inventory::new();
    let (set, errors) = PolicySet::compile_documents(loaded.documents);
    inv.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    for o in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "a"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "a"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "shop", "namespace": "a"},
               "spec": {"rules": [{"host": "shop.example"}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "a"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}),
    ] {
        inv.upsert(&o, None).expect("inventory object");
    }
    let e = Engine::new(set, inv, EngineOptions::default());
    e.set_ready(true);
    e
}
