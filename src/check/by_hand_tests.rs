use super::*;

// Command shapes from kubectl's reference for `kubectl create configmap`,
// `kubectl create secret` and `kubectl create serviceaccount`.
const README: &str = "\
Create the gateway's settings first:

```bash
kubectl create configmap gateway-env --from-literal \\
  endpoint=https://example.test
kubectl create cm app-settings -n team --from-file=settings.json
kubectl create secret generic db-creds --namespace=data --from-literal=password=x
kubectl create secret tls site-tls --cert=tls.crt --key=tls.key -nweb
kubectl --context=gke-1 create configmap haproxy-config --from-file=haproxy.cfg -n demo
kubectl -n other --kubeconfig /tmp/k create sa builder
kubectl get sa create
kubectl create namespace team && kubectl create serviceaccount app-ksa --namespace team
kubectl create configmap $NAME --from-file=x
kubectl create secret generic <your-secret>
kubectl create deployment web --image=nginx
```
";

#[test]
fn kubectl_create_commands_name_their_objects_and_namespaces() {
    let got = commands(README, "README.md");
    let short: Vec<(&str, &str, Option<&str>, &str)> = got
        .iter()
        .map(|c| {
            (
                c.kind,
                c.name.as_str(),
                c.namespace.as_deref(),
                c.at.as_str(),
            )
        })
        .collect();
    assert_eq!(
        short,
        [
            ("ConfigMap", "gateway-env", None, "README.md:4"),
            ("ConfigMap", "app-settings", Some("team"), "README.md:6"),
            ("Secret", "db-creds", Some("data"), "README.md:7"),
            ("Secret", "site-tls", Some("web"), "README.md:8"),
            ("ConfigMap", "haproxy-config", Some("demo"), "README.md:9"),
            ("ServiceAccount", "builder", Some("other"), "README.md:10"),
            ("ServiceAccount", "app-ksa", Some("team"), "README.md:12"),
        ]
    );
}

#[test]
fn the_repository_readme_is_read_from_an_input_below_it() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("sample/deploy")).unwrap();
    std::fs::write(
        root.join("sample/README.md"),
        "kubectl create configmap gateway-env --from-literal a=b\n",
    )
    .unwrap();
    let got = created(&[root.join("sample/deploy")]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].name, "gateway-env");
    assert_eq!(got[0].at, "sample/README.md:1");
}
