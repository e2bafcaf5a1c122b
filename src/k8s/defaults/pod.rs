//! Pods and pod specs: `SetDefaults_Pod`, `SetDefaults_PodSpec`, and the
//! container, probe and volume defaults kube-apiserver applies under them.

use super::{
    child, child_or_new, default_int, default_ptr, default_str, each, resource_list,
    resource_requirements, str_of, Map,
};
use serde_json::{json, Value as Json};

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// A Pod: what only Pods get (requests from limits, `enableServiceLinks`,
/// host ports under host networking), then the pod spec's defaults.
/// Pod-level `spec.resources` defaulting (PodLevelResources) is not done.
pub(super) fn pod(pod: &mut Map) {
    let Some(spec) = child_or_new(pod, "spec") else {
        return;
    };
    for list in ["containers", "initContainers"] {
        for c in each(spec, list) {
            requests_from_limits(c);
        }
    }
    default_ptr(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork") == Some(&Json::Bool(true)) {
        for list in ["containers", "initContainers"] {
            for c in each(spec, list) {
                host_ports(c);
            }
        }
    }
    pod_spec(spec);
}

/// A container's requests default to its limits, resource by resource.
fn requests_from_limits(container: &mut Map) {
    let Some(resources) = child(container, "resources") else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Json::as_object).cloned() else {
        return;
    };
    if limits.is_empty() {
        return;
    }
    let Some(requests) = child_or_new(resources, "requests") else {
        return;
    };
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

fn host_ports(container: &mut Map) {
    for port in each(container, "ports") {
        let unset = port.get("hostPort").is_none_or(|p| p.as_f64() == Some(0.0));
        if unset {
            if let Some(p) = port.get("containerPort").cloned() {
                port.insert("hostPort".into(), p);
            }
        }
    }
}

/// A pod spec, in a Pod or in any template (`SetObjectDefaults_PodTemplate`
/// and the workloads apply the same).
pub(super) fn pod_spec(spec: &mut Map) {
    service_account_alias(spec);
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_ptr(spec, "securityContext", json!({}));
    default_ptr(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");
    for v in each(spec, "volumes") {
        volume(v);
    }
    for list in CONTAINER_LISTS {
        for c in each(spec, list) {
            container(c);
        }
    }
    resource_list(spec, "overhead");
    resource_requirements(spec, "resources");
}

/// `serviceAccount` is the deprecated name of `serviceAccountName`: the
/// conversion fills in each from the other (the new name wins).
fn service_account_alias(spec: &mut Map) {
    let name = match str_of(spec, "serviceAccountName") {
        "" => str_of(spec, "serviceAccount").to_string(),
        name => name.to_string(),
    };
    if !name.is_empty() {
        spec.insert("serviceAccountName".into(), json!(name));
        spec.insert("serviceAccount".into(), json!(name));
    }
}

fn container(c: &mut Map) {
    // A struct in Go, written out even when empty.
    default_ptr(c, "resources", json!({}));
    let policy = pull_policy(str_of(c, "image"));
    default_str(c, "imagePullPolicy", policy);
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    for port in each(c, "ports") {
        default_str(port, "protocol", "TCP");
    }
    for env in each(c, "env") {
        let Some(from) = child(env, "valueFrom") else {
            continue;
        };
        if let Some(field) = child(from, "fieldRef") {
            default_str(field, "apiVersion", "v1");
        }
        if let Some(file) = child(from, "fileKeyRef") {
            default_ptr(file, "optional", json!(false));
        }
    }
    resource_requirements(c, "resources");
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = child(c, key) {
            probe(p);
        }
    }
    if let Some(lifecycle) = child(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(get) = child(lifecycle, hook).and_then(|h| child(h, "httpGet")) {
                http_get(get);
            }
        }
    }
}

fn probe(p: &mut Map) {
    default_int(p, "timeoutSeconds", 1);
    default_int(p, "periodSeconds", 10);
    default_int(p, "successThreshold", 1);
    default_int(p, "failureThreshold", 3);
    if let Some(get) = child(p, "httpGet") {
        http_get(get);
    }
    if let Some(grpc) = child(p, "grpc") {
        default_ptr(grpc, "service", json!(""));
    }
}

fn http_get(get: &mut Map) {
    default_str(get, "path", "/");
    default_str(get, "scheme", "HTTP");
}

/// `IfNotPresent`, or `Always` for an image tagged `latest` or not tagged
/// and not pinned by digest (`SetDefaults_Container`). A reference that
/// does not parse counts as untagged-but-not-latest: `IfNotPresent`, as Go's
/// parser error leaves the tag empty.
pub(super) fn pull_policy(image: &str) -> &'static str {
    match image_tag(image) {
        Some(Tag::Latest) => "Always",
        _ => "IfNotPresent",
    }
}

#[derive(Debug, PartialEq)]
enum Tag {
    Latest,
    Other,
}

/// What `parsers.ParseImageName` makes of the tag: `None` when the
/// reference does not parse.
fn image_tag(image: &str) -> Option<Tag> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        if !valid_digest(d) {
            return None;
        }
    }
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if !valid_repository(repo) {
        return None;
    }
    match tag {
        Some(t) if !valid_tag(t) => None,
        Some("latest") => Some(Tag::Latest),
        Some(_) => Some(Tag::Other),
        None if digest.is_some() => Some(Tag::Other),
        None => Some(Tag::Latest),
    }
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(t: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = t.chars();
    chars.next().is_some_and(word)
        && t.len() <= 128
        && chars.all(|c| word(c) || c == '.' || c == '-')
}

/// The digests Go's `digest.Parse` accepts: a registered algorithm and
/// lowercase hex of its length.
fn valid_digest(d: &str) -> bool {
    let Some((alg, hex)) = d.split_once(':') else {
        return false;
    };
    let len = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    hex.len() == len
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `ParseNormalizedNamed`'s checks of the name: an optional domain, then
/// lowercase path components (`[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`),
/// not a bare 64-hex identifier, at most 255 characters in all.
fn valid_repository(repo: &str) -> bool {
    if repo.is_empty() || repo.len() > 255 {
        return false;
    }
    if repo.len() == 64
        && repo
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return false;
    }
    let path = match repo.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            if !valid_domain(first) {
                return false;
            }
            rest
        }
        _ => repo,
    };
    path.split('/').all(valid_component)
}

fn valid_domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || d.starts_with('[') => (h, Some(p)),
        _ => (d, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if host.starts_with('[') {
        return host.ends_with(']') && host.len() > 2;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn valid_component(c: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    // Separators between alphanumeric runs: `.`, `_`, `__`, or dashes.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn volume(v: &mut Map) {
    // `ptr.AllPtrFieldsNil(&VolumeSource)`: a volume with only a name.
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(image) = child(v, "image") {
        let policy = pull_policy(str_of(image, "reference"));
        default_str(image, "pullPolicy", policy);
    }
    volume_source(v);
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = child(v, key) {
            default_ptr(source, "defaultMode", json!(420));
        }
    }
    if let Some(downward) = child(v, "downwardAPI") {
        field_refs(downward);
    }
    if let Some(projected) = child(v, "projected") {
        for source in each(projected, "sources") {
            if let Some(downward) = child(source, "downwardAPI") {
                field_refs(downward);
            }
            if let Some(token) = child(source, "serviceAccountToken") {
                default_ptr(token, "expirationSeconds", json!(3600));
            }
        }
    }
    if let Some(template) = child(v, "ephemeral").and_then(|e| child(e, "volumeClaimTemplate")) {
        default_ptr(template, "metadata", json!({}));
        if let Some(spec) = child_or_new(template, "spec") {
            pvc_spec(spec);
        }
    }
}

/// The sources a Pod's volume and a PersistentVolume share.
pub(super) fn volume_source(v: &mut Map) {
    if let Some(host_path) = child(v, "hostPath") {
        default_ptr(host_path, "type", json!(""));
    }
    if let Some(iscsi) = child(v, "iscsi") {
        default_str(iscsi, "iscsiInterface", "default");
    }
    if let Some(rbd) = child(v, "rbd") {
        default_str(rbd, "pool", "rbd");
        default_str(rbd, "user", "admin");
        default_str(rbd, "keyring", "/etc/ceph/keyring");
    }
    if let Some(disk) = child(v, "azureDisk") {
        default_ptr(disk, "cachingMode", json!("ReadWrite"));
        default_ptr(disk, "fsType", json!("ext4"));
        default_ptr(disk, "readOnly", json!(false));
        default_ptr(disk, "kind", json!("Shared"));
    }
    if let Some(scale_io) = child(v, "scaleIO") {
        default_str(scale_io, "storageMode", "ThinProvisioned");
        default_str(scale_io, "fsType", "xfs");
    }
}

fn field_refs(downward: &mut Map) {
    for item in each(downward, "items") {
        if let Some(field) = child(item, "fieldRef") {
            default_str(field, "apiVersion", "v1");
        }
    }
}

/// A PersistentVolumeClaim's spec, in a claim or in a template.
pub(super) fn pvc_spec(spec: &mut Map) {
    default_ptr(spec, "volumeMode", json!("Filesystem"));
    default_ptr(spec, "resources", json!({}));
    resource_requirements(spec, "resources");
}
