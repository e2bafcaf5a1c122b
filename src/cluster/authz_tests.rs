use super::*;

fn question(verb: &str) -> Question {
    (
        UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        },
        Attributes::Path {
            path: "/x".into(),
            verb: verb.into(),
        },
    )
}

/// An authorizer whose API server accepts connections and never
/// answers, and the runtime it asks on.
fn silent_server() -> (
    SarAuthorizer,
    tokio::runtime::Runtime,
    std::net::TcpListener,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = {
        let _in_runtime = rt.enter();
        kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
    };
    let authz = SarAuthorizer::new(client, rt.handle().clone());
    (authz, rt, listener)
}

#[test]
fn a_check_stops_waiting_when_its_deadline_passes_and_never_blocks_a_runtime_thread() {
    let (authz, rt, _listener) = silent_server();
    let (user, attributes) = question("get");
    let deadline = crate::cel::interrupt::Interrupt::new();
    let setter = deadline.clone();
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        setter.cancel();
    });
    assert_eq!(authz.authorize(&user, &attributes, Some(&deadline)), None);
    timer.join().unwrap();
    // Without a deadline, the call's own timeout answers, as an error.
    let d = authz.authorize(&user, &attributes, None).unwrap();
    assert!(!d.allowed);
    assert_eq!(
        d.error.as_deref(),
        Some("SubjectAccessReview: no answer within 2s")
    );
    // On a runtime thread it refuses to wait.
    let d = rt.block_on(async { authz.authorize(&user, &attributes, None) });
    assert!(d.unwrap().error.unwrap().contains("async runtime thread"));
}

#[test]
fn answers_are_reused_until_they_expire_and_the_cache_stays_bounded() {
    let mut cache = Cache::default();
    let t0 = Instant::now();
    let yes = Decision {
        allowed: true,
        ..Decision::default()
    };
    cache.put(question("get"), yes.clone(), t0);
    assert_eq!(
        cache.get(&question("get"), t0 + Duration::from_secs(1)),
        Some(yes)
    );
    assert_eq!(cache.get(&question("list"), t0), None);
    assert_eq!(cache.get(&question("get"), t0 + CACHE_TTL), None);
    for i in 0..CACHE_CAPACITY + 10 {
        cache.put(question(&format!("v{i}")), Decision::default(), t0);
    }
    assert_eq!(cache.answers.len(), CACHE_CAPACITY);
    // Expired answers go first when it is full.
    let later = t0 + CACHE_TTL;
    cache.put(question("new"), Decision::default(), later);
    assert_eq!(cache.answers.len(), 1);
}

#[test]
fn a_review_carries_the_user_and_attributes_as_kube_apiserver_builds_them() {
    let user = UserInfo {
        username: "alice".into(),
        uid: "u-1".into(),
        groups: vec!["devs".into()],
        extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
    };
    let sar = review(
        &user,
        &Attributes::Resource {
            group: "".into(),
            resource: "pods".into(),
            subresource: "".into(),
            namespace: "team".into(),
            name: "".into(),
            verb: "list".into(),
            field_selector: "spec.nodeName=n".into(),
            label_selector: "".into(),
        },
    );
    assert_eq!(
        serde_json::to_value(&sar.spec).unwrap(),
        serde_json::json!({
            "user": "alice", "uid": "u-1", "groups": ["devs"], "extra": {"scopes": ["a"]},
            "resourceAttributes": {"group": "", "resource": "pods", "namespace": "team",
                "verb": "list", "fieldSelector": {"rawSelector": "spec.nodeName=n"}}
        })
    );
    let sa = review(
        &UserInfo::service_account("ns", "sa"),
        &Attributes::Path {
            path: "/healthz".into(),
            verb: "get".into(),
        },
    );
    assert_eq!(
        serde_json::to_value(&sa.spec).unwrap(),
        serde_json::json!({
            "user": "system:serviceaccount:ns:sa",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:ns"],
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"}
        })
    );
}

#[test]
fn the_status_reads_as_the_in_process_decision() {
    let status = |e: Option<&str>| SubjectAccessReviewStatus {
        allowed: false,
        denied: None,
        evaluation_error: e.map(String::from),
        reason: Some("no RBAC policy matched".into()),
    };
    assert_eq!(
        decision(status(None)),
        Decision {
            allowed: false,
            reason: "no RBAC policy matched".into(),
            error: None
        }
    );
    assert_eq!(decision(status(Some(SELECTOR_NOTES[0]))).error, None);
    assert_eq!(
        decision(status(Some(
            format!("webhook down; {}", SELECTOR_NOTES[2]).as_str()
        )))
        .error,
        Some("webhook down".into())
    );
}
