//! Synthetic clusters for `benches/check.rs`: namespaces of applications,
//! each application a Deployment with its Pods, a Service, usually an
//! Ingress, a ConfigMap, a Secret, a PodDisruptionBudget and an HPA, written
//! as multi-document YAML (one file per namespace, plus a file of
//! Namespaces and a few `kind: List` JSON files).
//!
//! Mostly compliant with the bundled library, with a few violations sown in
//! at fixed rates (duplicate Ingress hosts, missing ConfigMaps, HPAs
//! pointing at nothing, `latest` tags), so the run does real work on the
//! findings path too. Deterministic: the same size gives the same bytes.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What was written.
#[derive(Debug, Default, Clone)]
pub struct Generated {
    pub objects: usize,
    pub files: usize,
    pub bytes: u64,
    /// Violations sown in, by kind of mistake.
    pub duplicate_hosts: usize,
    pub missing_config_maps: usize,
    pub dangling_hpas: usize,
    pub latest_tags: usize,
}

/// Applications per namespace.
const APPS_PER_NAMESPACE: usize = 10;

/// xorshift64*: small, deterministic, good enough for picking names. Not the
/// tests' shared generator (tests/support/rng.rs, plain xorshift64): its
/// sequence is the benches' input, and every figure in docs/PERFORMANCE.md
/// was measured on the clusters this exact sequence generates.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True once in `n` draws on average.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    fn hex(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        while s.len() < len {
            let _ = write!(s, "{:016x}", self.next());
        }
        s.truncate(len);
        s
    }
    fn uid(&mut self) -> String {
        let h = self.hex(32);
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

const TEAMS: &[&str] = &[
    "payments", "search", "catalog", "identity", "platform", "data", "growth", "mobile",
];
const COMPONENTS: &[&str] = &[
    "api",
    "worker",
    "frontend",
    "gateway",
    "scheduler",
    "indexer",
    "cache",
    "ingest",
];

struct App {
    ns: String,
    name: String,
    team: &'static str,
    component: &'static str,
    replicas: u64,
    host: String,
    image: String,
}

/// Objects one application contributes (Deployment, Pods, Service, ConfigMap,
/// Secret, PDB, HPA, usually an Ingress).
fn app_objects(
    app: &App,
    rng: &mut Rng,
    out: &mut String,
    g: &mut Generated,
    all_hosts: &[String],
) -> usize {
    let mut n = 0;
    let App {
        ns,
        name,
        team,
        component,
        replicas,
        image,
        ..
    } = app;
    let labels = format!(
        "      app.kubernetes.io/name: {name}\n      app.kubernetes.io/component: {component}\n      app.kubernetes.io/part-of: {ns}\n      team: {team}\n"
    );
    // 1 in 400 pod templates reads a ConfigMap that does not exist.
    let config_ref = if rng.one_in(400) {
        g.missing_config_maps += 1;
        format!("{name}-config-old")
    } else {
        format!("{name}-config")
    };
    let image = if rng.one_in(500) {
        g.latest_tags += 1;
        format!(
            "{}:latest",
            image
                .rsplit_once(':')
                .map_or(image.as_str(), |(repo, _)| repo)
        )
    } else {
        image.clone()
    };
    let pod_spec = |indent: &str| -> String {
        let s = format!(
            r#"serviceAccountName: default
automountServiceAccountToken: false
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
containers:
  - name: {component}
    image: {image}
    imagePullPolicy: IfNotPresent
    args: ["--config=/etc/app/config.yaml", "--log-format=json"]
    ports:
      - name: http
        containerPort: 8080
      - name: metrics
        containerPort: 9090
    env:
      - name: POD_NAME
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      - name: LOG_LEVEL
        value: info
      - name: DATABASE_PASSWORD
        valueFrom:
          secretKeyRef:
            name: {name}-credentials
            key: password
      - name: CACHE_HOST
        valueFrom:
          configMapKeyRef:
            name: {config_ref}
            key: cache.host
    envFrom:
      - configMapRef:
          name: {name}-config
    resources:
      requests:
        cpu: 250m
        memory: 256Mi
      limits:
        cpu: "1"
        memory: 512Mi
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      periodSeconds: 10
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      initialDelaySeconds: 10
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: ["ALL"]
    volumeMounts:
      - name: config
        mountPath: /etc/app
        readOnly: true
      - name: tmp
        mountPath: /tmp
volumes:
  - name: config
    configMap:
      name: {config_ref}
  - name: tmp
    emptyDir: {{}}
"#
        );
        s.lines().map(|l| format!("{indent}{l}\n")).collect()
    };

    // Deployment.
    let _ = write!(
        out,
        r#"---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {ns}
  labels:
{labels}  annotations:
    example.com/owner: {team}@example.com
    deployment.kubernetes.io/revision: "{rev}"
spec:
  replicas: {replicas}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app.kubernetes.io/name: {name}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
  template:
    metadata:
      labels:
{tlabels}    spec:
{spec}"#,
        labels = labels.replace("      ", "    "),
        tlabels = labels.replace("      ", "        "),
        rev = rng.below(40) + 1,
        spec = pod_spec("      "),
    );
    n += 1;

    // Pods of the Deployment (as a cluster dump has them).
    let hash = rng.hex(10);
    for _ in 0..*replicas {
        let suffix = rng.hex(5);
        let _ = write!(
            out,
            r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-{hash}-{suffix}
  namespace: {ns}
  uid: {uid}
  labels:
{labels}    pod-template-hash: "{hash}"
  ownerReferences:
    - apiVersion: apps/v1
      kind: ReplicaSet
      name: {name}-{hash}
      uid: {owner}
      controller: true
spec:
  nodeName: node-{node}.cluster.internal
{spec}"#,
            labels = labels.replace("      ", "    "),
            uid = rng.uid(),
            owner = rng.uid(),
            node = rng.below(64),
            spec = pod_spec("  "),
        );
        n += 1;
    }

    // Service.
    let _ = write!(
        out,
        r#"---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {ns}
  labels:
{labels}spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/component: {component}
  ports:
    - name: http
      port: 80
      targetPort: http
    - name: metrics
      port: 9090
      targetPort: metrics
"#,
        labels = labels.replace("      ", "    "),
    );
    n += 1;

    // Ingress for most apps; 1 in 250 claims a host another app owns.
    if !rng.one_in(5) {
        let host = if !all_hosts.is_empty() && rng.one_in(250) {
            g.duplicate_hosts += 1;
            all_hosts[rng.below(all_hosts.len() as u64) as usize].clone()
        } else {
            app.host.clone()
        };
        let _ = write!(
            out,
            r#"---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
  namespace: {ns}
  annotations:
    cert-manager.io/cluster-issuer: letsencrypt
spec:
  ingressClassName: nginx
  tls:
    - hosts: [{host}]
      secretName: {name}-tls
  rules:
    - host: {host}
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: {name}
                port:
                  name: http
"#
        );
        n += 1;
    }

    // ConfigMap and Secret.
    let _ = write!(
        out,
        r#"---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
  namespace: {ns}
  labels:
    app.kubernetes.io/name: {name}
data:
  cache.host: redis.{ns}.svc.cluster.local
  config.yaml: |
    server:
      port: 8080
      readTimeout: 15s
    features:
      newCheckout: {flag}
---
apiVersion: v1
kind: Secret
metadata:
  name: {name}-credentials
  namespace: {ns}
type: Opaque
data:
  password: {secret}
"#,
        flag = rng.one_in(2),
        secret = rng.hex(44),
    );
    n += 2;

    // PodDisruptionBudget selecting the Deployment's pods.
    let _ = write!(
        out,
        r#"---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
  namespace: {ns}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {name}
"#
    );
    n += 1;

    // HPA; 1 in 300 targets a Deployment that does not exist.
    let target = if rng.one_in(300) {
        g.dangling_hpas += 1;
        format!("{name}-v2")
    } else {
        name.clone()
    };
    let _ = write!(
        out,
        r#"---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: {ns}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {target}
  minReplicas: {replicas}
  maxReplicas: {max}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 70
"#,
        max = replicas * 4,
    );
    n += 1;
    n
}

/// Where the generated files go.
enum Sink {
    /// One file each, in this folder.
    Dir(PathBuf),
    /// All of them one after another in one YAML stream.
    OneFile(io::BufWriter<std::fs::File>),
}

impl Sink {
    fn write(&mut self, name: &str, bytes: &[u8], g: &mut Generated) -> io::Result<()> {
        match self {
            Sink::Dir(dir) => write_file(&dir.join(name), bytes, g),
            Sink::OneFile(f) => {
                // The JSON Lists are YAML flow documents of their own.
                let marker: &[u8] = if bytes.starts_with(b"---") {
                    b""
                } else {
                    b"---\n"
                };
                f.write_all(marker)?;
                f.write_all(bytes)?;
                g.files = 1;
                g.bytes += (marker.len() + bytes.len()) as u64;
                Ok(())
            }
        }
    }
}

/// Writes a cluster of exactly `target` objects into `dir` (which must exist).
pub fn generate(dir: &Path, target: usize) -> io::Result<Generated> {
    generate_into(&mut Sink::Dir(dir.to_path_buf()), target)
}

/// The same cluster as [`generate`], as one multi-document YAML file.
#[allow(dead_code)] // benches/check.rs only
pub fn generate_file(path: &Path, target: usize) -> io::Result<Generated> {
    let mut sink = Sink::OneFile(io::BufWriter::new(std::fs::File::create(path)?));
    let g = generate_into(&mut sink, target)?;
    if let Sink::OneFile(mut f) = sink {
        f.flush()?;
    }
    Ok(g)
}

fn generate_into(sink: &mut Sink, target: usize) -> io::Result<Generated> {
    let mut g = Generated::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target as u64);
    let mut namespace_docs = String::new();
    let mut hosts: Vec<String> = Vec::new();
    let mut list_items: Vec<String> = Vec::new();
    let mut i = 0;
    // An application brings at most 12 objects (3 pods).
    while g.objects < target {
        let team = TEAMS[i % TEAMS.len()];
        let ns = format!("{team}-{i:05}");
        let _ = write!(
            namespace_docs,
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    team: {team}\n    pod-security.kubernetes.io/enforce: baseline\n"
        );
        g.objects += 1;
        let mut out = String::new();
        for a in 0..APPS_PER_NAMESPACE {
            if g.objects + 12 > target {
                break;
            }
            let component = COMPONENTS[(i + a) % COMPONENTS.len()];
            let name = format!("{component}-{a}");
            let app = App {
                host: format!("{name}.{ns}.apps.example.com"),
                ns: ns.clone(),
                name,
                team,
                component,
                replicas: 1 + rng.below(3),
                image: format!(
                    "registry.example.com/{team}/{component}:1.{}.{}",
                    rng.below(30),
                    rng.below(10)
                ),
            };
            g.objects += app_objects(&app, &mut rng, &mut out, &mut g, &hosts);
            hosts.push(app.host.clone());
        }
        // Every 25th namespace also brings a ConfigMap in a JSON List file.
        if i % 25 == 24 && g.objects < target {
            list_items.push(format!(
                r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "dashboards", "namespace": "{ns}"}}, "data": {{"overview.json": "{{\"panels\": []}}"}}}}"#
            ));
            g.objects += 1;
        }
        // The last namespace is topped up to the exact count with ConfigMaps.
        let mut k = 0;
        while g.objects < target && g.objects + 12 > target {
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-{k}\n  namespace: {ns}\ndata:\n  key: value-{k}\n"
            );
            g.objects += 1;
            k += 1;
        }
        sink.write(&format!("{ns}.yaml"), out.as_bytes(), &mut g)?;
        i += 1;
    }
    sink.write("namespaces.yaml", namespace_docs.as_bytes(), &mut g)?;
    for (k, chunk) in list_items.chunks(20).enumerate() {
        let text = format!(
            "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {}\n]}}\n",
            chunk.join(",\n  ")
        );
        sink.write(&format!("dashboards-{k}.json"), text.as_bytes(), &mut g)?;
    }
    Ok(g)
}

fn write_file(path: &Path, bytes: &[u8], g: &mut Generated) -> io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    g.files += 1;
    g.bytes += bytes.len() as u64;
    Ok(())
}
