use super::*;
use crate::cel::k8s_authz::{Attributes, Decision, UserInfo};
use crate::cluster::ClusterOptions;
use crate::fixtures::{compile, ingress, UNIQUE_HOST};
use crate::inventory::Inventory;
use std::sync::Mutex;

const ASKS_THE_AUTHORIZER: &str = "
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: may-create}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], resources: [ingresses], operations: [CREATE, UPDATE]}
  validations:
    - expression: \"authorizer.requestResource.check('create').allowed()\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: may-create}
spec: {policyName: may-create, validationActions: [Deny]}
";

/// Answers yes, and notes whether a writer could take the state's lock
/// at that moment, in the middle of the group's evaluation.
struct Probe {
    cluster: Arc<Cluster>,
    lock_free: Mutex<Vec<bool>>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probe")
    }
}

impl Authorizer for Probe {
    fn authorize(
        &self,
        _: &UserInfo,
        _: &Attributes,
        _: Option<&crate::cel::interrupt::Interrupt>,
    ) -> Option<Decision> {
        let free = self.cluster.lock_is_free();
        self.lock_free.lock().unwrap().push(free);
        Some(Decision {
            allowed: true,
            reason: String::new(),
            error: None,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_validation_holds_the_state_lock_per_lookup_only() {
    let mut inv = Inventory::new();
    let policies = compile(&[UNIQUE_HOST, ASKS_THE_AUTHORIZER], &mut inv);
    inv.upsert(&ingress("u", "other", "b.example", "s"), None)
        .expect("store");
    let cluster = Arc::new(Cluster::new(policies, inv, ClusterOptions::default()));
    let probe = Arc::new(Probe {
        cluster: cluster.clone(),
        lock_free: Mutex::default(),
    });
    let authorizer: Arc<dyn Authorizer> = probe.clone();
    let group = GroupRef {
        namespace: "t".into(),
        name: "g".into(),
        uid: "u1".into(),
        generation: 1,
        deleting: false,
    };
    let spec: ResourceGroupSpec = serde_json::from_value(serde_json::json!({
        "serviceAccountName": "deployer",
        "resources": [ingress("t", "web", "b.example", "s")],
    }))
    .expect("spec");
    let findings = validate_group(
        &cluster,
        &group,
        &spec,
        Some(&authorizer),
        &[],
        &crate::group::BuiltinScopes,
    )
    .await
    .expect("within the deadline");
    // The inventory was read: the other tenant's host is a conflict.
    assert!(
        findings.iter().any(|f| f.policy == "unique-host"),
        "{findings:?}"
    );
    let seen = probe.lock_free.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the authorizer was asked");
    assert!(
        seen.iter().all(|free| *free),
        "a writer could not get in mid-evaluation: {seen:?}"
    );
}

/// A client whose every request is answered by `answer` and noted.
fn recording(answer: &'static str) -> (Client, Arc<Mutex<Vec<http::Request<()>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let noted = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        noted.lock().unwrap().push(req.map(drop));
        let body = http_body_util::Full::new(bytes::Bytes::from_static(answer.as_bytes()));
        async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
    });
    (Client::new(service, "default"), seen)
}

fn configmap() -> (ApiResource, DesiredObject) {
    let gvk = kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap");
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "shop"}});
    let target = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "shop".into(),
        name: "c".into(),
        uid: Some("u-1".into()),
    };
    (
        ApiResource::from_gvk(&gvk),
        DesiredObject { target, object },
    )
}

#[tokio::test]
async fn a_writer_s_requests_carry_its_service_account_as_the_impersonated_user_only() {
    let (client, seen) =
        recording(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#);
    let (resource, d) = configmap();
    let writer = Writer {
        namespace: "shop",
        service_account: "deployer",
    };
    let deployer = As::writer(client.clone(), &writer).expect("a valid username");
    deployer
        .apply_member(&resource, &d, true)
        .await
        .expect("apply");
    deployer
        .delete(&resource, &d.target, DeleteParams::default())
        .await
        .expect("delete");
    As::itself(client)
        .delete(&resource, &d.target, DeleteParams::default())
        .await
        .expect("delete");
    let seen = seen.lock().unwrap();
    let user = |r: &http::Request<()>| {
        let values = r.headers().get_all("impersonate-user").iter();
        values
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let sa = vec!["system:serviceaccount:shop:deployer".to_string()];
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].method(), http::Method::PATCH);
    let uri = seen[0].uri().to_string();
    assert!(
        uri.contains("/api/v1/namespaces/shop/configmaps/c?") && uri.contains("dryRun=All"),
        "{uri}"
    );
    assert_eq!(user(&seen[0]), sa);
    assert_eq!(seen[1].method(), http::Method::DELETE);
    assert_eq!(user(&seen[1]), sa);
    // The controller's own deletes (of a group being deleted) are its own.
    assert!(user(&seen[2]).is_empty());
    for r in seen.iter() {
        // kube-apiserver derives the groups from the username; none named.
        assert!(r.headers().get("impersonate-group").is_none());
        assert!(r.headers().get("impersonate-uid").is_none());
    }
}

#[test]
fn a_username_that_cannot_be_a_header_is_an_error_naming_it() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let _in = rt.enter();
    let (client, _) = recording("{}");
    let writer = Writer {
        namespace: "shop",
        service_account: "bad\nname",
    };
    let e = As::writer(client, &writer).err().expect("refused");
    assert_eq!(e.user, "system:serviceaccount:shop:bad\nname");
}

/// Serves one HTTP request on a local port with `answer`, and returns the
/// request's head (request line and headers, lower-cased).
async fn one_request(answer: &'static str) -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        s.write_all(reply.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&head).to_lowercase()
    });
    (url, served)
}

#[tokio::test]
async fn a_kubeconfig_that_impersonates_lends_none_of_it_to_a_service_account_s_writes() {
    let (url, served) =
        one_request(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#).await;
    let mut config = kube::Config::new(url.parse().unwrap());
    config.auth_info.impersonate = Some("alice".into());
    config.auth_info.impersonate_groups = Some(vec!["ops".into()]);
    let client = Client::try_from(config.clone()).unwrap();
    let writer = Writer {
        namespace: "shop",
        service_account: "deployer",
    };
    let through = impersonator(&config, &client).expect("a client");
    let (resource, d) = configmap();
    As::writer(through, &writer)
        .unwrap()
        .apply_member(&resource, &d, true)
        .await
        .expect("apply");
    let head = served.await.unwrap();
    let values = |name: &str| -> Vec<String> {
        let prefix = format!("{name}: ");
        let lines = head.lines().filter_map(|l| l.strip_prefix(prefix.as_str()));
        lines.map(str::to_string).collect()
    };
    assert_eq!(
        values("impersonate-user"),
        ["system:serviceaccount:shop:deployer"],
        "{head}"
    );
    assert!(values("impersonate-group").is_empty(), "{head}");
}
