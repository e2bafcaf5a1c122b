use super::*;
use serde_json::json;

fn yaml(text: &str) -> Loaded {
    load_str(
        Source::file("t.yaml"),
        text,
        Format::Yaml,
        &LoadOptions::default(),
    )
}

fn json_in(text: &str) -> Loaded {
    load_str(
        Source::file("t.json"),
        text,
        Format::Json,
        &LoadOptions::default(),
    )
}

fn messages(l: &Loaded) -> Vec<String> {
    l.errors.iter().map(ToString::to_string).collect()
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";

#[test]
fn multi_document_stream_with_lines() {
    let text = "# leading comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n  namespace: ns\n...\n";
    let l = yaml(text);
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    assert_eq!(l.documents.len(), 2);
    assert_eq!(l.documents[0].line, 3);
    assert_eq!(l.documents[0].name(), Some("a"));
    assert_eq!(l.documents[1].line, 11);
    assert_eq!(l.documents[1].kind(), "Secret");
    assert_eq!(l.documents[1].namespace(), Some("ns"));
    assert_eq!(l.documents[1].display_name(), "Secret ns/b");
    assert_eq!(
        l.documents[1].line_of(&["metadata".into(), "namespace".into()]),
        Some(15)
    );
}

#[test]
fn field_lines() {
    let text = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: a
        image: nginx
        args: [x, y]
      - name: b
        image:
          busybox
";
    let l = yaml(text);
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    let d = &l.documents[0];
    let p = |s: &str| d.line_of_pointer(s);
    assert_eq!(p(""), Some(1));
    assert_eq!(p("/kind"), Some(2));
    assert_eq!(p("/metadata/name"), Some(4));
    assert_eq!(p("/spec/template/spec/containers"), Some(8));
    assert_eq!(p("/spec/template/spec/containers/0"), Some(9));
    assert_eq!(p("/spec/template/spec/containers/0/image"), Some(10));
    assert_eq!(p("/spec/template/spec/containers/0/args/1"), Some(11));
    assert_eq!(p("/spec/template/spec/containers/1"), Some(12));
    // A mapping entry's line is its key's line.
    assert_eq!(p("/spec/template/spec/containers/1/image"), Some(13));
    assert_eq!(p("/spec/missing"), None);
    assert_eq!(p("/spec/template/spec/containers/7"), None);
    assert_eq!(
        d.line_of(&[
            PathSegment::Key("spec"),
            PathSegment::Key("template"),
            PathSegment::Key("spec"),
            PathSegment::Key("containers"),
            PathSegment::Index(1),
            PathSegment::Key("name"),
        ]),
        Some(12)
    );
}

#[test]
fn scalar_resolution_in_documents() {
    let text = format!(
        "{CM}data:\n  a: yes\n  b: 'yes'\n  c: 0x10\n  d: 1.0\n  e: ~\n  f:\n  g: 2024-01-01\n  h: \"012\"\n  i: |\n    line\n  j: >-\n    folded\n    text\n  k: !!str 12\n  1: int key\n  on: bool key\n"
    );
    let l = yaml(&text);
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    assert_eq!(
        l.documents[0].value["data"],
        json!({"a": true, "b": "yes", "c": 16, "d": 1, "e": null, "f": null,
               "g": "2024-01-01", "h": "012", "i": "line\n", "j": "folded text",
               "k": "12", "1": "int key", "true": "bool key"})
    );
}

#[test]
fn flow_style() {
    let l = yaml("{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {x: '1'}}, data: {k: [1, two, {t: true}]}}");
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    assert_eq!(
        l.documents[0].value["data"],
        json!({"k": [1, "two", {"t": true}]})
    );
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let text = "apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  labels: &labels
    app: web
    tier: front
  annotations:
    <<: *labels
    tier: override
    extra: x
data:
  base: &b {p: 1, q: 2}
  list: [*b, *b]
  multi:
    <<: [{p: first}, {p: second, r: 3}]
";
    let l = yaml(text);
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    let v = &l.documents[0].value;
    assert_eq!(
        v["metadata"]["labels"],
        json!({"app": "web", "tier": "front"})
    );
    assert_eq!(
        v["metadata"]["annotations"],
        json!({"tier": "override", "extra": "x", "app": "web"})
    );
    assert_eq!(
        v["data"]["list"],
        json!([{"p": 1, "q": 2}, {"p": 1, "q": 2}])
    );
    assert_eq!(v["data"]["multi"], json!({"p": "first", "r": 3}));
}

#[test]
fn billion_laughs_is_stopped() {
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        let items = [prev.as_str(); 10].join(", ");
        text.push_str(&format!("  a{i}: &a{i} [{items}]\n"));
    }
    let start = std::time::Instant::now();
    let l = yaml(&text);
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert!(l.documents.is_empty());
    assert!(
        matches!(l.errors[0].kind, LoadErrorKind::AliasLimit { .. }),
        "{:?}",
        messages(&l)
    );
}

#[test]
fn recursive_alias_is_an_error() {
    let l = yaml(&format!("{CM}data: &a\n  x: *a\n"));
    assert!(l.documents.is_empty());
    assert!(!l.errors.is_empty());
}

#[test]
fn deep_nesting_is_stopped() {
    // Flow nesting within the parser's limit (255) but over ours.
    let text = format!("{CM}data: {}{}\n", "[".repeat(240), "]".repeat(240));
    let l = yaml(&text);
    assert!(l.documents.is_empty());
    assert!(
        matches!(l.errors[0].kind, LoadErrorKind::TooDeep { limit: 200 }),
        "{:?}",
        messages(&l)
    );
    // Deeper flow nesting: the parser's own limit, in words.
    let text = format!("{CM}data: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let l = yaml(&text);
    assert!(l.documents.is_empty());
    assert!(
        messages(&l)[0].contains("nested deeper than"),
        "{:?}",
        messages(&l)
    );
    // Block nesting.
    let text = format!("{CM}data:\n  k:\n  {}x\n", "- ".repeat(50_000));
    let l = yaml(&text);
    assert!(l.documents.is_empty());
    assert!(
        matches!(l.errors[0].kind, LoadErrorKind::TooDeep { limit: 200 }),
        "{:?}",
        messages(&l)
    );
    // Deep aliases count too.
    let mut t = format!("{CM}data:\n  a: &a ");
    t.push_str(&"[".repeat(150));
    t.push_str(&"]".repeat(150));
    t.push_str(&format!(
        "\n  b: {}*a{}\n",
        "[".repeat(100),
        "]".repeat(100)
    ));
    let l = yaml(&t);
    assert!(matches!(l.errors[0].kind, LoadErrorKind::TooDeep { .. }));
}

#[test]
fn duplicate_keys_are_errors() {
    let l = yaml(&format!("{CM}data:\n  a: 1\n  b: 2\n  a: 3\n"));
    assert!(l.documents.is_empty());
    assert_eq!(
        messages(&l),
        vec![
            "t.yaml:8:3: duplicate key \"a\" (first defined at line 6); remove one of them"
                .to_string()
        ]
    );
    // A key on its mapping's first line is not recorded (its line is the
    // mapping's); its duplicate further down still names that line.
    let l =
        yaml("apiVersion: v1\ndata: {}\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\n");
    assert_eq!(
        messages(&l),
        vec![
            "t.yaml:4:1: duplicate key \"apiVersion\" (first defined at line 1); remove one of them"
                .to_string()
        ]
    );
    // Keys equal once stringified are duplicates too.
    let l = yaml(&format!("{CM}data: {{1: a, \"1\": b}}\n"));
    assert!(matches!(
        l.errors[0].kind,
        LoadErrorKind::DuplicateKey { .. }
    ));
}

#[test]
fn syntax_error_costs_one_document() {
    let text = format!(
        "{CM}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n   bad: [\n---\n{CM}"
    );
    let mut t2 = text.clone();
    // Make the last document a different object.
    t2 = t2.replacen("name: a\n", "name: first\n", 1);
    let l = yaml(&t2);
    assert_eq!(l.documents.len(), 2, "{:?}", messages(&l));
    assert_eq!(l.documents[0].name(), Some("first"));
    assert_eq!(l.documents[1].line, 12);
    assert_eq!(l.errors.len(), 1);
    let e = &l.errors[0];
    assert_eq!(e.line, Some(10), "{e}");
    assert!(e.column.is_some());
    assert!(matches!(e.kind, LoadErrorKind::Syntax(_)));
}

#[test]
fn mapping_values_error_message() {
    let l = yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a: b\n");
    assert_eq!(l.errors.len(), 1);
    let m = l.errors[0].to_string();
    assert!(m.starts_with("t.yaml:4:"), "{m}");
    assert!(m.contains("mapping values are not allowed"), "{m}");
}

#[test]
fn yaml_1_1_booleans_get_a_hint() {
    let l = yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: no\n");
    assert_eq!(
        messages(&l),
        vec!["t.yaml:5: \"metadata.namespace\" must be a string, found a boolean (unquoted y, n, yes, no, on and off are booleans in YAML; quote the value)"]
    );
}

#[test]
fn objects_need_type_and_name() {
    let text = "apiVersion: v1\nmetadata:\n  name: a\n---\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: gen-\n---\n- a\n- b\n---\njust a string\n---\napiVersion: 3\nkind: X\nmetadata:\n  name: a\n";
    let l = yaml(text);
    assert_eq!(l.documents.len(), 1);
    assert_eq!(l.documents[0].name(), None);
    assert_eq!(l.documents[0].display_name(), "ConfigMap gen-*");
    assert_eq!(
        messages(&l),
        vec![
            "t.yaml:1: document has no \"kind\"; every Kubernetes object needs apiVersion and kind",
            "t.yaml:5: document has no \"apiVersion\"; every Kubernetes object needs apiVersion and kind",
            "t.yaml:11: document has no metadata.name (nor metadata.generateName); every Kubernetes object needs a name",
            "t.yaml:19: document is a list, not a mapping; every Kubernetes object is a mapping with apiVersion and kind",
            "t.yaml:22: document is a string, not a mapping; every Kubernetes object is a mapping with apiVersion and kind",
            "t.yaml:24: \"apiVersion\" must be a non-empty string, found a number",
        ]
    );
}

#[test]
fn lists_are_unpacked() {
    let text = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
- apiVersion: v1
  kind: ConfigMap
  metadata: {}
- apiVersion: v1
  kind: ConfigMapList
  items:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: nested
---
apiVersion: v1
kind: SecretList
items: []
";
    let l = yaml(text);
    assert_eq!(l.documents.len(), 2, "{:?}", messages(&l));
    assert_eq!(l.documents[0].name(), Some("a"));
    assert_eq!(l.documents[0].line, 4);
    assert_eq!(l.documents[0].line_of_pointer("/metadata/name"), Some(7));
    assert_eq!(l.documents[0].line_of_pointer("/kind"), Some(5));
    assert_eq!(l.documents[1].name(), Some("nested"));
    assert_eq!(l.documents[1].line, 14);
    assert_eq!(l.documents[1].line_of_pointer("/metadata/name"), Some(17));
    assert_eq!(l.errors.len(), 1);
    assert_eq!(l.errors[0].line, Some(10));
}

#[test]
fn json_files() {
    let text = r#"{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {
      "apiVersion": "v1",
      "kind": "ConfigMap",
      "metadata": {"name": "a"},
      "data": {"x": "1", "n": 2.0}
    },
    {"apiVersion": "v1", "kind": "ConfigMap",
     "metadata": {
       "name": "b"
     }}
  ]
}"#;
    let l = json_in(text);
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    assert_eq!(l.documents.len(), 2);
    assert_eq!(l.documents[0].line, 5);
    assert_eq!(l.documents[0].value["data"]["n"], json!(2));
    assert_eq!(l.documents[0].line_of_pointer("/metadata/name"), Some(8));
    assert_eq!(l.documents[1].line, 11);
    assert_eq!(l.documents[1].line_of_pointer("/metadata/name"), Some(13));

    let l = json_in("{\"apiVersion\": \"v1\",\n \"kind\": \"ConfigMap\",\n \"metadata\": {\"name\": \"a\",\n \"name\": \"b\"}}");
    assert_eq!(
        messages(&l),
        vec!["t.json:4:2: duplicate key \"name\" (first defined at line 3); remove one of them"]
    );
    let l = json_in("{\"apiVersion\": \"v1\",\n \"kind\": }");
    assert_eq!(l.errors.len(), 1);
    let m = l.errors[0].to_string();
    assert!(m.starts_with("t.json:2:"), "{m}");
}

#[test]
fn bad_scalars_and_keys() {
    let l = yaml(&format!("{CM}data:\n  a: .inf\n"));
    assert!(
        messages(&l)[0].starts_with("t.yaml:6:6: `.inf` is a YAML float"),
        "{:?}",
        messages(&l)
    );
    let l = yaml(&format!("{CM}data:\n  ~: x\n"));
    assert!(
        messages(&l)[0].contains("mapping key is null"),
        "{:?}",
        messages(&l)
    );
    let l = yaml(&format!("{CM}data:\n  ? [a]\n  : x\n"));
    assert!(
        messages(&l)[0].contains("mapping key is a sequence"),
        "{:?}",
        messages(&l)
    );
    let l = yaml(&format!("{CM}data:\n  a: !!int abc\n"));
    assert!(
        messages(&l)[0].contains("cannot read `abc` as !!int"),
        "{:?}",
        messages(&l)
    );
    let l = yaml(&format!("{CM}data:\n  <<: 3\n"));
    assert!(messages(&l)[0].contains("merge key"), "{:?}", messages(&l));
}

#[test]
fn empty_inputs() {
    assert!(yaml("").documents.is_empty() && yaml("").errors.is_empty());
    let l = yaml("# nothing\n---\n---\n...\n");
    assert!(
        l.documents.is_empty() && l.errors.is_empty(),
        "{:?}",
        messages(&l)
    );
    assert!(json_in("  \n").errors.is_empty());
}

#[test]
fn utf16_with_a_byte_order_mark_is_read_as_text() {
    // YAML 1.2, 5.2: a processor must read UTF-8 and UTF-16, told apart
    // by the byte order mark.
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    let le: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    let be: Vec<u8> = [0xFE, 0xFF]
        .into_iter()
        .chain(text.encode_utf16().flat_map(u16::to_be_bytes))
        .collect();
    for bytes in [le, be] {
        let l = load_bytes(
            Source::file("u.yaml"),
            &bytes,
            Format::Yaml,
            &LoadOptions::default(),
        );
        assert!(l.errors.is_empty(), "{:?}", l.errors);
        assert_eq!(l.documents.len(), 1);
    }
}

#[test]
fn not_utf8_and_too_large() {
    let l = load_bytes(
        Source::file("b.yaml"),
        b"a: 1\nb: \xff\n",
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert_eq!(l.errors[0].line, Some(2));
    assert!(matches!(
        l.errors[0].kind,
        LoadErrorKind::NotUtf8 { offset: 8 }
    ));
    let opts = LoadOptions {
        max_document_size: 9,
        ..LoadOptions::default()
    };
    let l = load_bytes(Source::file("b.json"), b"[1, 2, 3, 4]", Format::Json, &opts);
    assert!(matches!(
        l.errors[0].kind,
        LoadErrorKind::TooLarge { limit: 9 }
    ));
    // YAML is limited per document: the one too large is an error at its
    // line, the others are read.
    let text = format!(
        "{CM}---\na: {}\n---\n{}",
        "x".repeat(80),
        CM.replace("name: a", "name: b")
    );
    let l = load_bytes(
        Source::file("b.yaml"),
        text.as_bytes(),
        Format::Yaml,
        &LoadOptions {
            max_document_size: 60,
            ..opts
        },
    );
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    assert_eq!(l.errors[0].line, Some(CM.lines().count() + 1));
    assert!(matches!(
        l.errors[0].kind,
        LoadErrorKind::DocumentTooLarge { limit: 60 }
    ));
}

#[test]
fn duplicate_objects() {
    let l = yaml(&format!("{CM}---\n{CM}---\n{}", CM.replace("v1", "v2")));
    assert_eq!(l.documents.len(), 1);
    assert_eq!(
        messages(&l),
        vec![
            "t.yaml:6: duplicate object ConfigMap a; first defined at t.yaml:1",
            "t.yaml:11: duplicate object ConfigMap a; first defined at t.yaml:1",
        ]
    );
    let opts = LoadOptions {
        reject_duplicate_objects: false,
        ..LoadOptions::default()
    };
    let l = load_str(
        Source::Stdin,
        &format!("{CM}---\n{CM}"),
        Format::Yaml,
        &opts,
    );
    assert_eq!(l.documents.len(), 2);
}

#[test]
fn splitting_respects_directives_and_markers() {
    let text = "%YAML 1.2\n---\na: 1\n...\n%YAML 1.2\n---\nb: 2\n--- c\n---\n";
    let pieces = yaml::split_documents(text);
    let starts: Vec<usize> = pieces.iter().map(|p| p.2).collect();
    assert_eq!(starts, vec![1, 5, 8, 9]);
    // "---x" is not a marker.
    assert_eq!(yaml::split_documents("a: 1\n---x: 2\n").len(), 1);
}

#[test]
fn directories_stdin_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("b/c")).unwrap();
    std::fs::create_dir_all(root.join(".hidden")).unwrap();
    let obj = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
    std::fs::write(root.join("a.yaml"), obj("a")).unwrap();
    std::fs::write(root.join("b/c/d.yml"), obj("d")).unwrap();
    std::fs::write(
        root.join("b/b.json"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}"#,
    )
    .unwrap();
    std::fs::write(root.join("b/notes.txt"), "not yaml").unwrap();
    std::fs::write(root.join("c.YAML"), obj("c")).unwrap();
    std::fs::write(root.join(".hidden/x.yaml"), "bad: [").unwrap();
    #[cfg(unix)]
    {
        // A symlink loop must not hang, and a dangling manifest link is reported.
        std::os::unix::fs::symlink(root, root.join("b/c/loop")).unwrap();
        std::os::unix::fs::symlink(root.join("nope.yaml"), root.join("dangling.yaml")).unwrap();
    }
    let l = load_paths(
        &[root.to_path_buf(), root.join("missing.yaml")],
        &LoadOptions::default(),
    );
    let names: Vec<_> = l.documents.iter().filter_map(Document::name).collect();
    assert_eq!(names, vec!["a", "b", "d", "c"]);
    let errs = messages(&l);
    assert!(
        errs.iter()
            .any(|e| e.contains("missing.yaml: cannot read: no such file")),
        "{errs:?}"
    );
    #[cfg(unix)]
    assert!(errs.iter().any(|e| e.contains("dangling.yaml")), "{errs:?}");
    assert!(!errs.iter().any(|e| e.contains(".hidden")), "{errs:?}");
    // Naming a file twice reads it once.
    let l = load_paths(
        &[root.join("a.yaml"), root.join("b/../a.yaml")],
        &LoadOptions::default(),
    );
    assert_eq!(l.documents.len(), 1);
    assert!(l.errors.is_empty());
}

#[test]
fn large_stream_in_parallel_keeps_order() {
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns\ndata:\n  k: v{i}\n"
        ));
    }
    assert!(text.len() > 256 * 1024);
    let l = yaml(&text);
    assert!(l.errors.is_empty());
    assert_eq!(l.documents.len(), 5000);
    for (i, d) in l.documents.iter().enumerate() {
        assert_eq!(d.name(), Some(format!("cm-{i}").as_str()));
        assert_eq!(d.line, 2 + 8 * i);
        assert_eq!(d.line_of_pointer("/data/k"), Some(8 + 8 * i));
    }
}

#[test]
fn document_new_and_crlf() {
    let d = Document::new(Source::Stdin, 3, json!({"a": {"b": 1}}));
    assert_eq!(d.line_of_pointer("/a/b"), Some(3));
    let l = yaml("apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: b\r\n");
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
    assert_eq!(l.documents[1].line, 6);
    assert_eq!(l.documents[1].line_of_pointer("/metadata/name"), Some(9));
}

/// A realistic multi-kind stream of `n` objects, for timing.
pub(crate) fn synthetic_stream(n: usize) -> String {
    let mut s = String::with_capacity(n * 600);
    for i in 0..n {
        let ns = format!("team-{}", i % 50);
        match i % 4 {
            0 => s.push_str(&format!(
                "---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i}
  namespace: {ns}
  labels:
    app: web-{i}
    tier: frontend
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web-{i}
  template:
    metadata:
      labels:
        app: web-{i}
    spec:
      containers:
      - name: web
        image: \"registry.example.com/web:1.{i}\"
        ports:
        - containerPort: 8080
        envFrom:
        - configMapRef:
            name: cfg-{i}
        resources:
          limits: {{cpu: 500m, memory: 256Mi}}
"
            )),
            1 => s.push_str(&format!(
                "---
apiVersion: v1
kind: Service
metadata:
  name: svc-{i}
  namespace: {ns}
spec:
  selector:
    app: web-{i}
  ports:
  - port: 80
    targetPort: 8080
"
            )),
            2 => s.push_str(&format!(
                "---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg-{i}
  namespace: {ns}
data:
  LOG_LEVEL: info
  FEATURE_X: \"true\"
  config.yaml: |
    listen: :8080
    upstream: http://svc-{i}
"
            )),
            _ => s.push_str(&format!(
                "---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ing-{i}
  namespace: {ns}
spec:
  rules:
  - host: app-{i}.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: svc-{i}
            port:
              number: 80
"
            )),
        }
    }
    s
}

#[test]
fn fast_path_agrees_with_full_parser() {
    let samples = [
        "a: 1\nb:\n  c: [1]\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # comment\n  labels: {}\ndata:\n  a: 'it''s'\n  b: \"x\\ty\\u00e9\"\n  c: |\n    one\n\n    two\n  d: |-\n    x\n  e:\n  f: ~\n  g: yes\n",
        "list:\n- a\n- b: 1\n  c: 2\n-\n  d: 3\n- - x\n  - y\n-\n- [] # empty\n",
        "k: v\n# trailing comment\n\n",
        "---\n# c\nx:\n  - 1\n  - 2\ny: |\n\n  leading blank\n",
        "\"quoted key\": 1\n'single': 2\non: 3\n1.5: 4\n",
        "a: b\n  c\n",
        "a: b: c\n",
        "a:\n  b: 1\n c: 2\n",
        "- a\nb: 1\n",
        "a: |\n  x\n   y\n  z\n",
        "a: |\n    x\n  y\n",
        "a: 'x\n",
        "ünï: \"ç\"\nb: ü\n",
        "a: 1\na: 2\n",
        "a: [x, 'y', \"z\", http://h:80/p, 1.5]\nb: {cpu: 500m, 'm': \"1Gi\"} # c\nc: [ ]\nd: { }\n",
        "a: [x,]\n",
        "a: [x, [y]]\n",
        "a: {x: 1, x: 2}\n",
        "a: [a: 1]\n",
        "a: {b}\n",
        "a: [x] y\n",
        "a: [x, y #c]\n",
        "\n\nd:\n\n... \" rst:",
        "a: 1\n...\n",
        "m: {d: apiVsio:vn -}\n",
        "m: [a -, b]\n",
    ];
    let mut taken = 0;
    for s in samples {
        taken += yaml::compare_paths(s, &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(taken >= 8, "fast path took only {taken} samples");
    let n = yaml::compare_paths(&synthetic_stream(400), &LoadOptions::default()).unwrap();
    assert_eq!(n, 400, "the fast path should take every synthetic object");
}

#[test]
fn nested_anchors_do_not_copy_per_level() {
    let mut t = format!("{CM}data:\n  a: ");
    for i in 0..150 {
        t.push_str(&format!("&a{i} ["));
    }
    t.push_str(&vec!["x"; 5000].join(", "));
    t.push_str(&"]".repeat(150));
    t.push('\n');
    let start = std::time::Instant::now();
    let l = yaml(&t);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert!(
        matches!(l.errors[0].kind, LoadErrorKind::AliasLimit { .. }),
        "{:?}",
        messages(&l)
    );
}

#[test]
fn long_lines_stay_linear() {
    let items = vec!["é"; 30_000].join(", ");
    let t = format!(
        "{CM}data:\n  a: [{items}]\n  b: [{}]\n",
        vec!["x"; 30_000].join(", ")
    );
    let start = std::time::Instant::now();
    let l = yaml(&t);
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert!(l.errors.is_empty(), "{:?}", messages(&l));
}

#[test]
fn configuration_without_metadata_is_skipped_when_asked() {
    let opts = LoadOptions {
        skip_non_objects: true,
        ..LoadOptions::default()
    };
    // An istioctl profile and a component configuration: apiVersion and
    // kind, no metadata. Alone in a file: the file is skipped.
    let profile =
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: demo\n";
    let l = load_str(Source::file("p.yaml"), profile, Format::Yaml, &opts);
    assert!(
        l.documents.is_empty() && l.errors.is_empty(),
        "{:?}",
        l.errors
    );
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::Configuration));
    // Beside an object: the object is read, the configuration noted.
    let mixed = format!("{profile}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\n");
    let l = load_str(Source::file("m.yaml"), &mixed, Format::Yaml, &opts);
    assert_eq!(l.documents.len(), 1);
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::Configuration));
    // A tool's data with a kind but neither apiVersion nor metadata (kwok's
    // stage test data) is not an object either.
    let stage = "apiGroup: v1\nkind: Node\nname: node-not-ready\nstages: []\n";
    let l = load_str(Source::file("s.yaml"), stage, Format::Yaml, &opts);
    assert!(
        l.documents.is_empty() && l.errors.is_empty(),
        "{:?}",
        l.errors
    );
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::Configuration));
    // A tool's configuration of a kind of its own, with a namespace but no
    // name (istioctl's IstioOperator), is not an object either.
    let operator = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nmetadata: {namespace: istio-system}\nspec: {profile: default}\n";
    let l = load_str(Source::file("o.yaml"), operator, Format::Yaml, &opts);
    assert!(
        l.documents.is_empty() && l.errors.is_empty(),
        "{:?}",
        l.errors
    );
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::Configuration));
    // Metadata without a name stays an error: that is a broken object.
    let broken = "apiVersion: v1\nkind: ConfigMap\nmetadata: {labels: {}}\n";
    let l = load_str(Source::file("b.yaml"), broken, Format::Yaml, &opts);
    assert_eq!(l.errors.len(), 1);
    // Without the switch (policies, served inventories) it is an error.
    let l = yaml(profile);
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
}

#[test]
fn unparseable_files_that_name_no_kind_are_not_manifests() {
    let opts = LoadOptions {
        skip_non_objects: true,
        ..LoadOptions::default()
    };
    // mongoimport's data, and a template fragment.
    let l = load_str(
        Source::file("d.json"),
        "{rating: 5}\n{rating: 4}\n",
        Format::Json,
        &opts,
    );
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::NotObjects));
    // A broken manifest stays an error.
    let l = load_str(
        Source::file("b.yaml"),
        "apiVersion: v1\nkind: [\n",
        Format::Yaml,
        &opts,
    );
    assert_eq!(l.errors.len(), 1, "{:?}", l.errors);
    // A Go template named as one is not YAML until rendered; the same
    // text under a manifest's name stays an error.
    let template = "{{- if .Values.rbac }}\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: {{ .Name }}}\n{{- end }}\n";
    let l = load_str(
        Source::file("t/role.tmpl.yaml"),
        template,
        Format::Yaml,
        &opts,
    );
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(l.skipped.map(|s| s.reason), Some(SkipReason::Template));
    let l = load_str(Source::file("t/role.yaml"), template, Format::Yaml, &opts);
    assert!(!l.errors.is_empty());
}

#[path = "fuzz_tests.rs"]
mod fuzz;
