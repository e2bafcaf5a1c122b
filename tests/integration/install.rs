//! The install commands of docs/install.md against a real control plane of
//! the test's own (the shipped webhook configurations fail closed, so they
//! must never reach the shared cluster): `kubectl apply -k` of the
//! interlock-certs overlay, as shipped, is accepted object by object; the
//! same apply again changes nothing; with the webhook down, the documented
//! bypass lets a tenant's write through and the apply restores it; the
//! documented uninstall leaves nothing behind.
//!
//! Then the same install with the shipped ServiceAccounts' tokens, the
//! webhook reached through the shipped Service
//! ([`install_runs_with_the_shipped_accounts_through_the_shipped_service`]).
//!
//! Not shown here (no kubelet runs pods in the test cluster): the
//! Deployments' pods (image, probes, mounts, securityContext) becoming
//! Ready, and a rolling upgrade to a next version.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value as Json;

use crate::chart::Manifests;
use crate::support::cluster::{Options, TestCluster};

fn ok(cluster: &TestCluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl apply's lines ("kind/name created") that do not end in `word`.
fn lines_not(output: &str, word: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| !l.trim_end().ends_with(word))
        .map(str::to_string)
        .collect()
}

/// Every object of the overlay as "Kind namespace/name resourceVersion".
fn versions(cluster: &TestCluster, overlay: &str) -> Vec<String> {
    let columns = "custom-columns=KIND:.kind,NAMESPACE:.metadata.namespace,\
                   NAME:.metadata.name,VERSION:.metadata.resourceVersion";
    let out = ok(
        cluster,
        &["get", "-k", overlay, "--no-headers", "-o", columns],
    );
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn install_overlay_applies_reapplies_as_a_no_op_bypasses_and_uninstalls() {
    let cluster = TestCluster::start_with(Options {
        // The namespace controller: uninstall deletes interlock-system.
        controller_manager: true,
        ..Options::default()
    });
    let _logs = cluster.logs_on_panic();
    let m = Manifests::with_certs();
    let overlay = m.overlay("interlock-certs");
    let overlay = overlay.to_str().expect("a UTF-8 path");
    let objects = m.kustomize("interlock-certs").len();

    let first = ok(&cluster, &["apply", "-k", overlay]);
    assert_eq!(
        first.lines().count(),
        objects,
        "one line per object:\n{first}"
    );
    assert_eq!(
        lines_not(&first, " created"),
        Vec::<String>::new(),
        "{first}"
    );

    // Upgrade to the same version: nothing is written. kubectl still says
    // "configured" for a few objects (the Secret and the
    // ValidatingWebhookConfiguration: kustomize wraps base64 at 76 columns
    // and the API server returns it unwrapped; the PodDisruptionBudgets: a
    // selector is patched by replacement, so kubectl always sends it); the
    // API server, finding each object unchanged, writes nothing. So the
    // resourceVersions, not kubectl's words, are what must not move (an
    // empty `webhooks: []` did move them, on every apply).
    let before = versions(&cluster, overlay);
    assert_eq!(before.len(), objects, "{before:#?}");
    let again = ok(&cluster, &["apply", "-k", overlay]);
    assert_eq!(again.lines().count(), objects, "{again}");
    assert_eq!(
        versions(&cluster, overlay),
        before,
        "the second apply wrote:\n{again}"
    );

    // No webhook pod runs here, as when every replica is down: the strict
    // webhook refuses a tenant's Ingress, the documented bypass
    // (docs/webhook-down.md) lets it through, and applying the overlay
    // again restores failurePolicy Fail.
    ok(&cluster, &["create", "namespace", "tenant-a"]);
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\n\
                   metadata: {name: shop, namespace: tenant-a}\n\
                   spec: {rules: [{host: shop.example.com}]}\n";
    let refused = cluster.kubectl_stdin(&["create", "-f", "-"], ingress);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("validate.interlock.dev"),
        "the strict webhook, unreachable, refuses the write: {stderr}"
    );
    let hooks = "jsonpath={.webhooks[*].name}";
    let names = ok(
        &cluster,
        &[
            "get",
            "validatingwebhookconfiguration",
            "interlock",
            "-o",
            hooks,
        ],
    );
    assert!(names.starts_with("validate.interlock.dev "), "{names}");
    ok(
        &cluster,
        &[
            "patch",
            "validatingwebhookconfiguration",
            "interlock",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#,
        ],
    );
    let admitted = cluster.kubectl_stdin(&["create", "-f", "-"], ingress);
    assert!(
        admitted.status.success(),
        "bypassed: {}",
        String::from_utf8_lossy(&admitted.stderr)
    );
    ok(&cluster, &["apply", "-k", overlay]);
    let policy = "jsonpath={.webhooks[0].failurePolicy}";
    let restored = ok(
        &cluster,
        &[
            "get",
            "validatingwebhookconfiguration",
            "interlock",
            "-o",
            policy,
        ],
    );
    assert_eq!(restored, "Fail", "apply -k restores the strict webhook");
    ok(
        &cluster,
        &["delete", "namespace", "tenant-a", "--wait=false"],
    );

    // Uninstall, in the documented order: admission first, so nothing the
    // later deletes touch waits on a webhook that is going away.
    ok(
        &cluster,
        &[
            "delete",
            "validatingwebhookconfiguration/interlock",
            "mutatingwebhookconfiguration/interlock",
        ],
    );
    ok(
        &cluster,
        &["delete", "-k", overlay, "--ignore-not-found", "--wait=true"],
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // Every kind the overlay makes cluster-wide or in its namespace
        // carries the base's label.
        let left = ok(
            &cluster,
            &[
                "get",
                "namespaces,customresourcedefinitions,clusterroles,clusterrolebindings,\
                 validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l",
                "app.kubernetes.io/part-of=interlock",
                "-o",
                "name",
            ],
        );
        if left.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left after uninstall (120 s):\n{left}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

// ---------------------------------------------------------------------------
// The install with the shipped accounts, through the shipped Service
// ---------------------------------------------------------------------------

/// The permissions of the shipped roles that
/// [`install_runs_with_the_shipped_accounts_through_the_shipped_service`]
/// does not use, and why: rows of ("ACCOUNT: VERBS GROUP/RESOURCES", why),
/// verbs and resources comma-separated, the core group as `core`. The test
/// fails when the shipped roles grant the two accounts anything it neither
/// uses nor lists here, and when a row names something they do not grant. Some rows may be used in one run
/// and not in another (a Lease renewal, a claim's renewal): they are listed
/// because a run need not use them.
const NOT_EXERCISED: &[(&str, &str)] = &[
    (
        "interlock: get core/configmaps,secrets,serviceaccounts,persistentvolumeclaims,services,pods",
        "the webhook reads through list and watch only; it never sends a get",
    ),
    (
        "interlock: get apps/deployments,statefulsets,daemonsets,replicasets",
        "as above",
    ),
    (
        "interlock: get batch/jobs,cronjobs",
        "as above",
    ),
    (
        "interlock: get networking.k8s.io/ingresses",
        "as above",
    ),
    (
        "interlock: get policy/poddisruptionbudgets",
        "as above",
    ),
    (
        "interlock: get autoscaling/horizontalpodautoscalers",
        "as above",
    ),
    (
        "interlock: list,watch core/pods",
        "no bundled policy reads these kinds (they only match them); a site's own policies may",
    ),
    (
        "interlock: list,watch apps/daemonsets",
        "as above",
    ),
    (
        "interlock: list,watch batch/jobs,cronjobs",
        "as above",
    ),
    (
        "interlock: list,watch policy/poddisruptionbudgets",
        "as above",
    ),
    (
        "interlock: list,watch autoscaling/horizontalpodautoscalers",
        "as above",
    ),
    (
        "interlock: get,update coordination.k8s.io/leases",
        "renewing a claim: only when a key already held is claimed again by its holder",
    ),
    (
        "interlock: list,delete coordination.k8s.io/leases",
        "the sweep of stale claims and their release, after --claim-grace",
    ),
    (
        "interlock: create authorization.k8s.io/subjectaccessreviews",
        "no bundled policy calls authorizer check()",
    ),
    (
        "interlock-controller: create authorization.k8s.io/subjectaccessreviews",
        "as above",
    ),
    (
        "interlock-controller: update coordination.k8s.io/leases",
        "the Lease's renewal (a replace): the test may end before the first",
    ),
    (
        "interlock-controller: get,update interlock.dev/resourcegroups",
        "groups are read from the watch and written by patch",
    ),
    (
        "interlock-controller: update interlock.dev/resourcegroups/finalizers",
        "checked only by the OwnerReferencesPermissionEnforcement admission plugin, which this kube-apiserver does not enable",
    ),
    (
        "interlock-controller: get,patch core/configmaps,secrets,serviceaccounts,persistentvolumeclaims,services,pods",
        "as itself the controller deletes members and patches them only to release them (deletionPolicy: Orphan, not used here); it never sends a get",
    ),
    (
        "interlock-controller: get,patch,delete apps/deployments,statefulsets,daemonsets,replicasets",
        "as above; the groups here hold ConfigMaps only, so only their delete is used",
    ),
    (
        "interlock-controller: delete core/secrets,serviceaccounts,persistentvolumeclaims,services,pods",
        "as above",
    ),
    (
        "interlock-controller: get,patch,delete batch/jobs,cronjobs",
        "as above",
    ),
    (
        "interlock-controller: get,patch,delete networking.k8s.io/ingresses",
        "as above",
    ),
    (
        "interlock-controller: get,list,watch,patch,delete networking.k8s.io/networkpolicies",
        "a member kind that no policy reads: watched once a group holds one (none does here)",
    ),
    (
        "interlock-controller: get,patch,delete policy/poddisruptionbudgets",
        "as the member kinds above",
    ),
    (
        "interlock-controller: get,patch,delete autoscaling/horizontalpodautoscalers",
        "as above",
    ),
    (
        "interlock-controller: list,create,patch wgpolicyk8s.io/policyreports,clusterpolicyreports",
        "the cluster serves OpenReports, which the audit then writes instead",
    ),
    (
        "interlock-controller: create,patch openreports.io/clusterreports",
        "no cluster-scoped object violates a policy here",
    ),
    (
        "interlock: get interlock.dev/interlockpolicies",
        "InterlockPolicy objects are read through list and watch only",
    ),
    (
        "interlock-controller: get interlock.dev/interlockpolicies",
        "as above",
    ),
    (
        "interlock: update interlock.dev/interlockpolicies/status",
        "no InterlockPolicy object is created here, so no status is written",
    ),
    (
        "interlock: update interlock.dev/interlocknamespacepolicies/status",
        "no InterlockNamespacePolicy object is created here, so no status is written",
    ),
];

/// [`NOT_EXERCISED`] as permission strings.
fn not_exercised() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (row, _why) in NOT_EXERCISED {
        let (account, rest) = row
            .split_once(": ")
            .expect("ACCOUNT: VERBS GROUP/RESOURCES");
        let (verbs, rest) = rest.split_once(' ').expect("VERBS GROUP/RESOURCES");
        let (group, resources) = rest.split_once('/').expect("GROUP/RESOURCES");
        let group = if group == "core" { "" } else { group };
        for v in verbs.split(',') {
            for r in resources.split(',') {
                out.insert(permission(account, v, group, r));
            }
        }
    }
    out
}

/// The install of docs/install.md with nothing stood in for: the webhook
/// and the controller run as local processes, but with tokens of the
/// shipped ServiceAccounts `interlock` and `interlock-controller` (`kubectl
/// create token`), so they hold the shipped RBAC and nothing else, and with
/// the shipped Deployments' arguments; kube-apiserver (started with
/// `--enable-aggregator-routing`, so it dials a Service's endpoints) reaches
/// the webhook through the shipped Service `interlock-system/interlock`,
/// whose EndpointSlice points into a network namespace the test creates
/// (an EndpointSlice may not name a loopback address), and checks the
/// serving certificate against the caBundle the overlay wrote. The overlay
/// is applied as shipped, with the certificates of the documented command.
///
/// Then, as tenants with kubectl (ServiceAccounts of their namespaces with
/// the built-in `admin` role there): a second namespace's Ingress with a
/// host the first holds is refused by `validate.interlock.dev`; the
/// owner's update of its Ingress is admitted; a ResourceGroup converges
/// (Ready True, its members written as its `deployer`), and the documented
/// uninstall's first command (`kubectl delete resourcegroups --all -A
/// --wait`) deletes it with its members while the controller runs; a
/// Deployment that references a missing ConfigMap, admitted with a
/// warning, is listed as a failure in the namespace's OpenReports Report
/// by the continuous audit (`--audit`, as shipped); with the controller
/// stopped, a deleted group stays on `interlock.dev/members`, and a
/// tenant's account with only the RBAC of docs/finalizers.md ("Who may run
/// it") lists it with `interlock unstick` (the controller's Lease read) and
/// clears it.
///
/// Any request of the two ServiceAccounts that kube-apiserver refused with
/// 403 fails the test (from kube-apiserver's audit log), and so do a
/// process that is not ready and a log line of theirs that says forbidden.
/// From the same audit log, every permission the shipped roles grant the
/// two accounts is checked as used, except those in [`NOT_EXERCISED`]
/// (with the reason for each). In short, not exercised: `get` on every
/// kind either process reads (both read through list and watch); the
/// webhook's list/watch of Pods, DaemonSets, Jobs, CronJobs,
/// PodDisruptionBudgets and HorizontalPodAutoscalers (no bundled policy
/// reads them); the renewal, sweep and release of claims; SubjectAccessReviews
/// (no bundled policy calls `authorizer`); the controller's Lease renewal;
/// `get`/`update` on ResourceGroups and `update` on
/// `resourcegroups/finalizers`; the controller's own `patch` (release) and
/// `delete` of member kinds other than ConfigMaps, and every verb on
/// NetworkPolicies; PolicyReports (the cluster serves OpenReports) and the
/// OpenReports ClusterReport (no cluster-scoped violation).
///
/// The cluster's kube-controller-manager runs its controllers as their own
/// kube-system ServiceAccounts, as kubeadm does (which the shipped webhooks
/// leave alone); the pods of the Deployments themselves are not run (no
/// kubelet).
///
/// Needs CAP_NET_ADMIN, iproute2 (`ip netns`) and curl: without them it
/// fails, naming what is missing; it does not skip.
#[test]
fn install_runs_with_the_shipped_accounts_through_the_shipped_service() {
    let addrs = VethAddrs::for_this_process();
    let netns = Netns::create(&addrs);
    let work = tempfile::tempdir().expect("tempdir");
    let audit_policy = work.path().join("audit-policy.yaml");
    let audit_log = work.path().join("audit.log");
    std::fs::write(&audit_policy, AUDIT_POLICY).expect("write the audit policy");
    let cluster = TestCluster::start_with(Options {
        controller_manager: true,
        // The garbage collector as in a real cluster: as itself, which the
        // shipped webhooks leave alone (not as the admin user, whose
        // removal of a member's foregroundDeletion finalizer the ownership
        // boundary refuses).
        controller_service_accounts: true,
        // The built-in admin and view roles the tenants are given.
        extra_controllers: vec!["clusterrole-aggregation-controller".into()],
        apiserver_args: vec![
            "--enable-aggregator-routing=true".into(),
            format!("--audit-policy-file={}", audit_policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-format=json".into(),
        ],
        serving_addresses: vec![addrs.host],
        ..Options::default()
    });
    let _logs = cluster.logs_on_panic();
    let port = cluster
        .url()
        .rsplit(':')
        .next()
        .expect("a port")
        .to_string();

    // docs/install.md, steps 2 and 3.
    let m = Manifests::with_certs();
    let overlay_path = m.overlay("interlock-certs");
    let overlay = overlay_path.to_str().expect("a UTF-8 path");
    ok(&cluster, &["apply", "-k", overlay]);
    let reports_crds =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/openreports/crds.yaml");
    ok(
        &cluster,
        &["apply", "-f", reports_crds.to_str().expect("a UTF-8 path")],
    );
    ok(
        &cluster,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=120s",
            "crd/resourcegroups.interlock.dev",
            "crd/interlockexceptions.interlock.dev",
            "crd/reports.openreports.io",
            "crd/clusterreports.openreports.io",
        ],
    );

    // Where the shipped Service leads: the webhook's address in the
    // network namespace, on the port its Deployment names `https`.
    let rendered = m.kustomize("interlock-certs");
    let webhook_args = container_args(&rendered, "interlock");
    let listen_port = webhook_args
        .iter()
        .find_map(|a| a.strip_prefix("--listen="))
        .and_then(|l| l.rsplit(':').next())
        .expect("the webhook's --listen")
        .to_string();
    let slice = format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata:\n  name: interlock-install-test\n  namespace: interlock-system\n  labels:\n\
         \x20   kubernetes.io/service-name: interlock\n\
         \x20   endpointslice.kubernetes.io/managed-by: install.interlock.dev\n\
         addressType: IPv4\n\
         ports: [{{name: https, port: {listen_port}, protocol: TCP}}]\n\
         endpoints: [{{addresses: ['{}'], conditions: {{ready: true}}}}]\n",
        addrs.netns
    );
    ok_stdin(&cluster, &["apply", "-f", "-"], &slice);

    // The shipped ServiceAccounts' own tokens: the webhook reaches
    // kube-apiserver across the veth pair, the controller on loopback.
    let webhook_kc = sa_kubeconfig(
        &cluster,
        work.path(),
        "interlock-system",
        "interlock",
        &format!("https://{}:{port}", addrs.host),
    );
    let controller_kc = sa_kubeconfig(
        &cluster,
        work.path(),
        "interlock-system",
        "interlock-controller",
        cluster.url(),
    );

    // The shipped arguments, with the certificate files where this test
    // has them and the listeners on the test's addresses.
    let certs = m.certs();
    let webhook_args: Vec<String> = webhook_args
        .into_iter()
        .map(|a| {
            if a.starts_with("--tls-cert=") {
                format!("--tls-cert={}", certs.join("tls.crt").display())
            } else if a.starts_with("--tls-key=") {
                format!("--tls-key={}", certs.join("tls.key").display())
            } else if a.starts_with("--listen=") {
                format!("--listen={}:{listen_port}", addrs.netns)
            } else {
                a
            }
        })
        .collect();
    let admin_port = free_port();
    let controller_args: Vec<String> = container_args(&rendered, "interlock-controller")
        .into_iter()
        .map(|a| {
            if a.starts_with("--admin-addr=") {
                format!("--admin-addr=127.0.0.1:{admin_port}")
            } else {
                a
            }
        })
        .collect();
    let mut webhook_cmd = Command::new("ip");
    webhook_cmd
        .args(["netns", "exec", &netns.name])
        .arg(env!("CARGO_BIN_EXE_interlock"))
        .args(&webhook_args)
        .env("KUBECONFIG", &webhook_kc)
        .env("POD_NAMESPACE", "interlock-system")
        .env("RUST_LOG", "info,interlock=debug");
    let webhook = Process::start("webhook", webhook_cmd, work.path());
    let mut controller_cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
    controller_cmd
        .args(&controller_args)
        .env("KUBECONFIG", &controller_kc)
        .env("POD_NAMESPACE", "interlock-system")
        .env("POD_NAME", "interlock-controller-install-test")
        .env("RUST_LOG", "info,interlock=debug");
    let mut controller = Process::start("controller", controller_cmd, work.path());

    let ca = certs.join("ca.crt");
    let webhook_ready = || {
        https_status(
            &ca,
            "interlock.interlock-system.svc",
            &addrs.netns.to_string(),
            &listen_port,
            "/readyz",
        ) == Some(200)
    };
    let controller_ready = || http_status(admin_port, "/readyz") == Some(200);
    poll("the webhook's /readyz answers 200", &[&webhook], || {
        webhook_ready()
            .then_some(())
            .ok_or_else(|| "not 200".to_string())
    });
    poll(
        "the controller's /readyz answers 200",
        &[&controller],
        || {
            controller_ready()
                .then_some(())
                .ok_or_else(|| "not 200".to_string())
        },
    );

    // Tenants: two namespaces, an account of each with the built-in admin
    // role there and ResourceGroups; a `deployer` that groups write as.
    let (team_a, team_b) = ("team-a", "team-b");
    let tenant = |ns: &str, user: &str| {
        ok(&cluster, &["create", "namespace", ns]);
        ok(&cluster, &["-n", ns, "create", "serviceaccount", user]);
        ok(
            &cluster,
            &[
                "-n",
                ns,
                "create",
                "rolebinding",
                &format!("{user}-admin"),
                "--clusterrole=admin",
                &format!("--serviceaccount={ns}:{user}"),
            ],
        );
        ok(
            &cluster,
            &[
                "-n",
                ns,
                "create",
                "role",
                "groups",
                "--verb=*",
                "--resource=resourcegroups.interlock.dev",
            ],
        );
        ok(
            &cluster,
            &[
                "-n",
                ns,
                "create",
                "rolebinding",
                &format!("{user}-groups"),
                "--role=groups",
                &format!("--serviceaccount={ns}:{user}"),
            ],
        );
        sa_kubeconfig(&cluster, work.path(), ns, user, cluster.url())
    };
    let alice = tenant(team_a, "alice");
    let bob = tenant(team_b, "bob");
    crate::support::tenant::grant_deployer(
        &cluster,
        team_a,
        &[crate::support::tenant::all_verbs(
            "",
            &["configmaps", "services"],
        )],
    );
    let as_alice = |args: &[&str], stdin: Option<&str>| kubectl_as(&cluster, &alice, args, stdin);
    let as_bob = |args: &[&str], stdin: Option<&str>| kubectl_as(&cluster, &bob, args, stdin);

    // Admission through the Service: the first write can come before
    // kube-apiserver's informers have the EndpointSlice (then it is
    // refused as unreachable, failurePolicy Fail), so poll on a dry run.
    let ingress = |ns: &str, name: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{name: {name}, namespace: {ns}}}\n\
             spec: {{rules: [{{host: shop.example.com, http: {{paths: [{{path: /, pathType: Prefix, \
             backend: {{service: {{name: shop, port: {{number: 80}}}}}}}}]}}}}]}}\n"
        )
    };
    poll(
        "a tenant's dry-run Ingress is admitted through the Service",
        &[&webhook, &controller],
        || {
            let out = as_alice(
                &["create", "--dry-run=server", "-f", "-"],
                Some(&ingress(team_a, "shop")),
            );
            out.status.success().then_some(()).ok_or_else(|| text(&out))
        },
    );
    let created = as_alice(&["create", "-f", "-"], Some(&ingress(team_a, "shop")));
    assert!(created.status.success(), "{}", text(&created));
    let refused = as_bob(&["create", "-f", "-"], Some(&ingress(team_b, "shop")));
    let said = text(&refused);
    assert!(
        !refused.status.success()
            && said.contains("denied the request")
            && said.contains("shop.example.com"),
        "team-b's Ingress for team-a's host is refused by the webhook:\n{said}"
    );

    // The owner of a host updates its Ingress: the webhook renews its
    // claim (docs/admission.md, "Claims across replicas").
    let labelled = as_alice(
        &["-n", team_a, "label", "ingress", "shop", "tier=front"],
        None,
    );
    assert!(labelled.status.success(), "{}", text(&labelled));

    // ResourceGroups converge; deleted while the controller runs, a group
    // goes with its members (docs/install.md, uninstall: groups first).
    let group = |name: &str| {
        format!(
            "apiVersion: interlock.dev/v1alpha1\nkind: ResourceGroup\n\
             metadata: {{name: {name}, namespace: {team_a}}}\n\
             spec:\n  serviceAccountName: deployer\n  resources:\n\
             \x20 - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}-config}}, data: {{CURRENCY: EUR}}}}\n\
             \x20 - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}-flags}}, data: {{CHECKOUT: v2}}}}\n"
        )
    };
    let converged = |name: &str| {
        let applied = as_alice(&["apply", "-f", "-"], Some(&group(name)));
        assert!(applied.status.success(), "{}", text(&applied));
        poll(
            &format!("ResourceGroup {name} is Ready"),
            &[&webhook, &controller],
            || {
                let out = as_alice(
                    &[
                        "-n",
                        team_a,
                        "get",
                        "resourcegroup",
                        name,
                        "-o",
                        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                    ],
                    None,
                );
                (text_out(&out) == "True")
                    .then_some(())
                    .ok_or_else(|| text(&out))
            },
        );
        let members = as_alice(
            &[
                "-n",
                team_a,
                "get",
                &format!("configmap/{name}-config"),
                &format!("configmap/{name}-flags"),
            ],
            None,
        );
        assert!(members.status.success(), "{}", text(&members));
    };
    converged("shop");
    // docs/install.md, uninstall, first command (with a bound on the wait).
    ok(
        &cluster,
        &[
            "delete",
            "resourcegroups",
            "--all",
            "-A",
            "--wait",
            "--timeout=180s",
        ],
    );
    let left = as_alice(&["-n", team_a, "get", "configmaps", "-o", "name"], None);
    assert!(
        left.status.success() && !text_out(&left).contains("shop-"),
        "the deleted group's members are gone:\n{}",
        text(&left)
    );
    converged("cart");

    // A violation the audit reports: admission only warns about a missing
    // reference (pod-references-exist), the audit counts it as a failure.
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\n\
         metadata: {{name: web, namespace: {team_a}}}\n\
         spec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n\
         \x20   metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n\
         \x20     - name: web\n        image: registry.example.com/web:1.0\n\
         \x20       resources: {{requests: {{cpu: 10m}}, limits: {{memory: 64Mi}}}}\n\
         \x20       envFrom: [{{configMapRef: {{name: web-config}}}}]\n"
    );
    let admitted = as_alice(&["create", "-f", "-"], Some(&deployment));
    assert!(
        admitted.status.success() && text(&admitted).contains("web-config"),
        "admitted with a warning naming the missing ConfigMap:\n{}",
        text(&admitted)
    );
    poll(
        "team-a's Report lists the Deployment's missing ConfigMap",
        &[&webhook, &controller],
        || {
            // As the admin: a tenant's roles do not cover reports.
            let out = cluster.kubectl(&[
                "-n",
                team_a,
                "get",
                "reports.openreports.io",
                "interlock",
                "-o",
                "json",
            ]);
            let report: Json = serde_json::from_slice(&out.stdout).map_err(|_| text(&out))?;
            report["results"]
                .as_array()
                .ok_or_else(|| report.to_string())?
                .iter()
                .any(|r| {
                    r["policy"] == "pod-references-exist"
                        && r["result"] == "fail"
                        && r["resources"][0]["name"] == "web"
                })
                .then_some(())
                .ok_or_else(|| report["results"].to_string())
        },
    );

    // Everything so far with the shipped RBAC: nothing refused, both ready.
    assert!(
        webhook_ready(),
        "the webhook stayed ready:\n{}",
        webhook.log()
    );
    assert!(
        controller_ready(),
        "the controller stayed ready:\n{}",
        controller.log()
    );
    for p in [&webhook, &controller] {
        let forbidden: Vec<String> = p
            .log()
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("forbidden") || l.contains(" 403")
            })
            .map(str::to_string)
            .collect();
        assert!(
            forbidden.is_empty(),
            "the {} was refused:\n{}",
            p.name,
            forbidden.join("\n")
        );
    }

    // interlock unstick with the RBAC of docs/finalizers.md: the controller
    // stops, a deleted group stays on its finalizer.
    assert!(controller.running(), "{}", controller.log());
    controller.stop();
    let deleted = as_alice(
        &[
            "-n",
            team_a,
            "delete",
            "resourcegroup",
            "cart",
            "--wait=false",
        ],
        None,
    );
    assert!(deleted.status.success(), "{}", text(&deleted));
    let oncall = unstick_account(&cluster, work.path(), team_a);
    let listed = interlock_as(
        &oncall,
        &["unstick", "-n", team_a, "--older-than", "0s", "-o", "json"],
    );
    assert_eq!(
        listed.status.code(),
        Some(1),
        "stuck objects listed: {}",
        text(&listed)
    );
    let stuck: Json = serde_json::from_slice(&listed.stdout).expect("unstick -o json");
    let held = stuck
        .as_array()
        .or_else(|| stuck["stuck"].as_array())
        .expect("a list of stuck objects")
        .iter()
        .any(|s| {
            s["kind"] == "ResourceGroup"
                && s["name"] == "cart"
                && s["finalizers"][0]["name"] == "interlock.dev/members"
                && s["finalizers"][0]["controller_status"]
                    .as_str()
                    .is_some_and(|c| {
                        // Read, not "unknown (cannot read Lease ...)".
                        !c.starts_with("unknown")
                            && c.contains("Lease interlock-system/interlock-controller")
                    })
        });
    assert!(
        held,
        "the group is listed, held by interlock.dev/members:\n{stuck:#}"
    );
    let cleared = interlock_as(
        &oncall,
        &[
            "unstick",
            "--clear",
            "interlock.dev/members",
            "--yes",
            "resourcegroup/cart",
            "-n",
            team_a,
        ],
    );
    assert_eq!(
        cleared.status.code(),
        Some(0),
        "cleared: {}",
        text(&cleared)
    );
    poll("the group is gone", &[&webhook], || {
        let out = cluster.kubectl(&["-n", team_a, "get", "resourcegroup", "cart"]);
        (!out.status.success() && text(&out).contains("NotFound"))
            .then_some(())
            .ok_or_else(|| text(&out))
    });

    // What kube-apiserver saw of the two accounts.
    let events = audit_events(&audit_log);
    let refused: Vec<&AuditEvent> = events.iter().filter(|e| e.code == Some(403)).collect();
    assert!(
        refused.is_empty(),
        "kube-apiserver refused the shipped accounts:\n{refused:#?}"
    );
    let used = used_permissions(&events);
    let granted = granted_permissions(&rendered);
    let listed = not_exercised();
    let wrong: Vec<&String> = listed.difference(&granted).collect();
    assert!(
        wrong.is_empty(),
        "NOT_EXERCISED names what the shipped roles do not grant: {wrong:#?}"
    );
    let unused: Vec<String> = granted.difference(&used).cloned().collect();
    let unlisted: Vec<&String> = unused.iter().filter(|p| !listed.contains(*p)).collect();
    assert!(
        unlisted.is_empty(),
        "granted, not used, and not in NOT_EXERCISED:\n{unlisted:#?}\n(all unused: {unused:#?})"
    );
    drop(webhook);
    drop(netns);
}

/// The two ends of the veth pair: a /30 of 10.213.0.0/16 chosen by the
/// test process's id, so two test processes do not collide.
struct VethAddrs {
    host: Ipv4Addr,
    netns: Ipv4Addr,
}

impl VethAddrs {
    fn for_this_process() -> VethAddrs {
        let n = std::process::id() % 16384;
        let third = u8::try_from(n / 64).expect("below 256");
        let fourth = u8::try_from((n % 64) * 4).expect("below 256");
        VethAddrs {
            host: Ipv4Addr::new(10, 213, third, fourth + 1),
            netns: Ipv4Addr::new(10, 213, third, fourth + 2),
        }
    }
}

/// A network namespace joined to the host by a veth pair, deleted on drop.
struct Netns {
    name: String,
    host_link: String,
}

impl Netns {
    /// Creates it, or panics naming what is missing (CAP_NET_ADMIN,
    /// iproute2): this test does not skip.
    fn create(addrs: &VethAddrs) -> Netns {
        let pid = std::process::id();
        let netns = Netns {
            name: format!("interlock-install-{pid}"),
            host_link: format!("ilkh{pid}"),
        };
        let peer = format!("ilkn{pid}");
        // Left over by a killed run of a process with the same id.
        netns.delete();
        let host_cidr = format!("{}/30", addrs.host);
        let netns_cidr = format!("{}/30", addrs.netns);
        let steps: [&[&str]; 8] = [
            &["netns", "add", &netns.name],
            &[
                "link",
                "add",
                &netns.host_link,
                "type",
                "veth",
                "peer",
                "name",
                &peer,
            ],
            &["link", "set", &peer, "netns", &netns.name],
            &["addr", "add", &host_cidr, "dev", &netns.host_link],
            &["link", "set", &netns.host_link, "up"],
            &["-n", &netns.name, "addr", "add", &netns_cidr, "dev", &peer],
            &["-n", &netns.name, "link", "set", &peer, "up"],
            &["-n", &netns.name, "link", "set", "lo", "up"],
        ];
        for step in steps {
            let out = Command::new("ip").args(step).output();
            let failed = match &out {
                Ok(o) if o.status.success() => continue,
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => format!("cannot run ip (iproute2; apt-get install -y iproute2): {e}"),
            };
            panic!(
                "cannot set up the network namespace the webhook runs in: `ip {}` failed: {failed}\n\
                 This test needs CAP_NET_ADMIN (root, or a container with NET_ADMIN) and \
                 iproute2; it does not skip without them.",
                step.join(" ")
            );
        }
        netns
    }

    fn delete(&self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_link])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.delete();
    }
}

/// A process of the test, its stderr and stdout in `NAME.log`, killed on
/// drop (and with the test process).
struct Process {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    fn start(name: &'static str, mut cmd: Command, dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("a log file");
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone().expect("a log file"))
            .stderr(file);
        let child = crate::support::cluster::spawn_tied_to_process(cmd)
            .unwrap_or_else(|e| panic!("cannot start the {name}: {e}"));
        Process {
            name,
            child: Some(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("----- {} log -----\n{}", self.name, self.log());
        }
    }
}

/// Polls `f` every half second until it gives a value; after 180 s fails
/// with `what`, the last answer and the processes' logs.
fn poll<T>(what: &str, procs: &[&Process], mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() > deadline {
            let logs: Vec<String> = procs
                .iter()
                .map(|p| format!("----- {} -----\n{}", p.name, p.log()))
                .collect();
            panic!(
                "not within 180 s: {what}\nlast: {last}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn ok_stdin(cluster: &TestCluster, args: &[&str], stdin: &str) -> String {
    let out = cluster.kubectl_stdin(args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}",
        text(&out)
    );
    text_out(&out)
}

/// stdout and stderr.
fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn text_out(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The args of the first container of Deployment `name` in `objects`.
fn container_args(objects: &[Json], name: &str) -> Vec<String> {
    let d = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Deployment {name} in the overlay"));
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect()
}

/// A kubeconfig for ServiceAccount `ns/name` with a token of
/// `kubectl create token`, reaching kube-apiserver at `server`.
fn sa_kubeconfig(cluster: &TestCluster, dir: &Path, ns: &str, name: &str, server: &str) -> PathBuf {
    let token = ok(
        cluster,
        &["-n", ns, "create", "token", name, "--duration=2h"],
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(cluster.serving_ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: test, cluster: {{server: '{server}', certificate-authority-data: {b64}}}}}]\n\
         users: [{{name: {name}, user: {{token: {}}}}}]\n\
         contexts: [{{name: {name}, context: {{cluster: test, user: {name}, namespace: {ns}}}}}]\n\
         current-context: {name}\n",
        token.trim()
    );
    let path = dir.join(format!("kubeconfig-{ns}-{name}"));
    std::fs::write(&path, kubeconfig).expect("write a kubeconfig");
    path
}

fn kubectl_as(
    cluster: &TestCluster,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    let mut cmd = Command::new(cluster.bin("kubectl"));
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", kubeconfig.with_extension("cache"))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run kubectl");
    if let Some(input) = stdin {
        use std::io::Write as _;
        let mut pipe = child.stdin.take().expect("piped");
        pipe.write_all(input.as_bytes())
            .expect("write kubectl's stdin");
    }
    child.wait_with_output().expect("kubectl ran")
}

fn interlock_as(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .output()
        .expect("run interlock")
}

/// `code` of `GET https://HOST:PORT/PATH` at `addr`, checked against `ca`
/// (curl, so the name checked is the Service's).
fn https_status(ca: &Path, host: &str, addr: &str, port: &str, path: &str) -> Option<u16> {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .arg("--cacert")
        .arg(ca)
        .arg("--resolve")
        .arg(format!("{host}:{port}:{addr}"))
        .arg(format!("https://{host}:{port}{path}"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run curl (apt-get install -y curl): {e}"));
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// `code` of `GET http://127.0.0.1:PORT/PATH`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

/// A ServiceAccount `oncall` of namespace `ns` with exactly the RBAC that
/// docs/finalizers.md ("Who may run it") gives: its YAML applied, its
/// bindings run for the account; its kubeconfig.
fn unstick_account(cluster: &TestCluster, dir: &Path, ns: &str) -> PathBuf {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/finalizers.md"))
            .expect("docs/finalizers.md");
    let section = doc
        .split("\n## Who may run it\n")
        .nth(1)
        .expect("docs/finalizers.md has \"## Who may run it\"");
    let block = |fence: &str| {
        section
            .split(fence)
            .nth(1)
            .and_then(|b| b.split("\n```").next())
            .unwrap_or_else(|| panic!("a {fence} block in \"Who may run it\""))
            .to_string()
    };
    ok_stdin(cluster, &["apply", "-f", "-"], &block("```yaml\n"));
    ok(cluster, &["-n", ns, "create", "serviceaccount", "oncall"]);
    let commands = block("```sh\n").replace("\\\n", " ");
    let mut bound = 0;
    for line in commands.lines().filter(|l| !l.trim().is_empty()) {
        let line = line
            .replace("team-a", ns)
            .replace("--user=alice", &format!("--serviceaccount={ns}:oncall"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.first(), Some(&"kubectl"), "{line}");
        ok(cluster, &words[1..]);
        bound += 1;
    }
    assert_eq!(bound, 3, "three bindings:\n{commands}");
    sa_kubeconfig(cluster, dir, ns, "oncall", cluster.url())
}

/// kube-apiserver's audit of the two shipped accounts' requests (metadata
/// only), and nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users:
      - system:serviceaccount:interlock-system:interlock
      - system:serviceaccount:interlock-system:interlock-controller
  - level: None
";

/// One request of the audit log (all of it shown, by Debug, when refused).
#[derive(Debug)]
#[allow(dead_code)]
struct AuditEvent {
    account: String,
    verb: String,
    group: String,
    resource: String,
    namespace: String,
    name: String,
    impersonated: Option<String>,
    code: Option<u64>,
}

fn audit_events(log: &Path) -> Vec<AuditEvent> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("cannot read the audit log {}: {e}", log.display()));
    let prefix = "system:serviceaccount:interlock-system:";
    text.lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter_map(|e| {
            let account = e["user"]["username"].as_str()?.strip_prefix(prefix)?;
            let r = &e["objectRef"];
            let resource = match r["subresource"].as_str() {
                Some(sub) => format!("{}/{sub}", r["resource"].as_str()?),
                None => r["resource"].as_str()?.to_string(),
            };
            let s = |v: &Json| v.as_str().unwrap_or_default().to_string();
            Some(AuditEvent {
                account: account.to_string(),
                verb: s(&e["verb"]),
                group: s(&r["apiGroup"]),
                resource,
                namespace: s(&r["namespace"]),
                name: s(&r["name"]),
                impersonated: e["impersonatedUser"]["username"]
                    .as_str()
                    .map(str::to_string),
                code: e["responseStatus"]["code"].as_u64(),
            })
        })
        .collect()
}

/// "ACCOUNT: VERB GROUP/RESOURCE", the core group ("") as `core`.
fn permission(account: &str, verb: &str, group: &str, resource: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{account}: {verb} {group}/{resource}")
}

/// What the accounts' requests used: each request's verb on its resource,
/// or, for a request made as another user, `impersonate` on that user's
/// kind (kube-apiserver authorizes the request itself as that user).
fn used_permissions(events: &[AuditEvent]) -> BTreeSet<String> {
    events
        .iter()
        // A 404 or 409 was authorized all the same.
        .filter(|e| !matches!(e.code, Some(401 | 403)))
        .flat_map(|e| match &e.impersonated {
            Some(_) => vec![permission(&e.account, "impersonate", "", "serviceaccounts")],
            // A server-side apply that created its object (201) was
            // authorized as a create too.
            None if e.verb == "patch" && e.code == Some(201) => vec![
                permission(&e.account, "patch", &e.group, &e.resource),
                permission(&e.account, "create", &e.group, &e.resource),
            ],
            None => vec![permission(&e.account, &e.verb, &e.group, &e.resource)],
        })
        .collect()
}

/// What the shipped roles grant the two accounts, from the rendered
/// overlay's bindings (resourceNames ignored).
fn granted_permissions(objects: &[Json]) -> BTreeSet<String> {
    let mut granted = BTreeSet::new();
    for b in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        for s in b["subjects"].as_array().into_iter().flatten() {
            if s["kind"] != "ServiceAccount" || s["namespace"] != "interlock-system" {
                continue;
            }
            let account = s["name"].as_str().expect("a subject's name");
            let role = objects
                .iter()
                .find(|o| {
                    o["kind"] == b["roleRef"]["kind"]
                        && o["metadata"]["name"] == b["roleRef"]["name"]
                })
                .unwrap_or_else(|| panic!("no {} in the overlay", b["roleRef"]));
            for rule in role["rules"].as_array().into_iter().flatten() {
                let strs = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|v| v.as_str().expect("a string").to_string())
                        .collect()
                };
                for g in strs("apiGroups") {
                    for r in strs("resources") {
                        for v in strs("verbs") {
                            granted.insert(permission(account, &v, &g, &r));
                        }
                    }
                }
            }
        }
    }
    granted
}
