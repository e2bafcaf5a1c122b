use super::sarif::sarif_uri;
use super::*;
use serde_json::{json, Value};

fn obj(kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: if kind == "Ingress" {
            "networking.k8s.io/v1".into()
        } else {
            "v1".into()
        },
        kind: kind.into(),
        namespace: ns.map(Into::into),
        name: name.into(),
    }
}

fn loc(file: &str, line: usize) -> SourceLocation {
    SourceLocation::at(file, line)
}

fn finding(policy: &str, action: Action, file: &str, line: usize, message: &str) -> Finding {
    Finding {
        policy: policy.into(),
        binding: None,
        action,
        object: obj("Service", Some("shop"), "web"),
        message: message.into(),
        source: loc(file, line),
        related: Vec::new(),
        reason: None,
    }
}

/// Three findings in two files, given out of order.
fn sample() -> Report {
    let mut ingress = finding(
        "unique-ingress-host",
        Action::Deny,
        "examples/b.yaml",
        3,
        "host \"a.example.com\" is already used",
    );
    ingress.object = obj("Ingress", Some("shop"), "web");
    ingress.related = vec![
        RelatedObject {
            object: obj("Ingress", Some("blog"), "www"),
            source: Some(loc("examples/a.yaml", 20)),
        },
        RelatedObject {
            object: obj("Ingress", Some("live"), "x"),
            source: None,
        },
    ];
    ingress.reason = Some("Invalid".into());
    let mut audit = finding(
        "pss-baseline",
        Action::Audit,
        "examples/a.yaml",
        1,
        "hostPath",
    );
    audit.binding = Some("pss-binding".into());
    Report {
        objects: 12,
        policies: 3,
        results: vec![
            ingress,
            finding(
                "unique-service-selector",
                Action::Warn,
                "examples/a.yaml",
                9,
                "selector is used by another Service",
            ),
            audit,
        ],
        errors: Vec::new(),
        notices: Vec::new(),
        mutations: Vec::new(),
        policy_names: vec![
            "pss-baseline".into(),
            "unique-ingress-host".into(),
            "unique-service-selector".into(),
            "hpa-target-exists".into(),
        ],
        evaluated: Vec::new(),
    }
}

const HOSTILE: &str = "bad </failure><x a=\"1\">&amp; 'q' \u{1b}[2J\u{7}\u{1}\r\n]]> \u{202e}end";

#[test]
fn exit_codes() {
    let mut r = Report::default();
    assert_eq!(r.exit_code(), 0);
    r.results.push(finding("p", Action::Warn, "a.yaml", 1, "m"));
    r.results
        .push(finding("p", Action::Audit, "a.yaml", 1, "m"));
    assert_eq!(r.exit_code(), 0);
    r.results.push(finding("p", Action::Deny, "a.yaml", 1, "m"));
    assert_eq!(r.exit_code(), 1);
    r.errors.push(InputError {
        file: "a.yaml".into(),
        line: Some(3),
        column: None,
        message: "bad".into(),
    });
    assert_eq!(r.exit_code(), 2);
}

#[test]
fn output_format_names() {
    for f in ["human", "json", "sarif", "junit"] {
        assert_eq!(f.parse::<OutputFormat>().unwrap().to_string(), f);
    }
    assert!("xml".parse::<OutputFormat>().is_err());
}

#[test]
fn human_format() {
    let mut out = Vec::new();
    sample().write_human(&mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    let expected = "\
examples/a.yaml:1: AUDIT pss-baseline (binding pss-binding): Service shop/web: hostPath
examples/a.yaml:9: WARN unique-service-selector: Service shop/web: selector is used by another Service

examples/b.yaml:3: DENY unique-ingress-host: Ingress shop/web: host \"a.example.com\" is already used
    reason: Invalid
    related: Ingress blog/www at examples/a.yaml:20
    related: Ingress live/x

12 objects checked against 3 policies: 3 violations (1 denied, 1 warned, 1 audited)
";
    assert_eq!(text, expected);
    assert!(!text.contains('\u{1b}'));

    let mut out = Vec::new();
    sample().write_human(&mut out, true).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("\u{1b}[1;31mDENY\u{1b}[0m"), "{text}");

    let clean = Report {
        objects: 1,
        policies: 1,
        ..Report::default()
    };
    let mut out = Vec::new();
    clean.write_human(&mut out, false).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "1 object checked against 1 policy: no violations\n"
    );
}

#[test]
fn human_format_escapes_terminal_controls() {
    let mut r = Report::default();
    r.results
        .push(finding("p", Action::Deny, "a.yaml", 1, HOSTILE));
    r.errors.push(InputError {
        file: "x\u{1b}.yaml".into(),
        line: None,
        column: None,
        message: "m".into(),
    });
    let mut out = Vec::new();
    r.write_human(&mut out, false).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'));
    assert!(!text.contains('\u{202e}'));
    assert!(text.contains("\\u{1b}[2J"), "{text}");
    // A newline in a message is indented under its finding.
    assert!(text.contains("\n    ]]>"), "{text}");
    assert!(
        text.ends_with("1 input error could not be read\n"),
        "{text}"
    );
    let mut err = Vec::new();
    r.write_errors(&mut err).unwrap();
    assert_eq!(String::from_utf8(err).unwrap(), "x\\u{1b}.yaml: m\n");
}

#[test]
fn json_format_matches_design() {
    let mut out = Vec::new();
    sample().write_json(&mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["summary"]["objects"], 12);
    assert_eq!(v["summary"]["policies"], 3);
    assert_eq!(v["summary"]["violations"], 3);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    // Sorted by file, line, policy.
    let places: Vec<(String, u64)> = results
        .iter()
        .map(|r| {
            (
                r["source"]["file"].as_str().unwrap().to_string(),
                r["source"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        places,
        vec![
            ("examples/a.yaml".to_string(), 1),
            ("examples/a.yaml".to_string(), 9),
            ("examples/b.yaml".to_string(), 3)
        ]
    );
    let first = &results[0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        &keys[..7],
        &["policy", "binding", "action", "object", "message", "source", "reason"]
    );
    assert_eq!(
        first["object"],
        json!({"apiVersion": "v1", "kind": "Service", "namespace": "shop", "name": "web"})
    );
    assert_eq!(first["binding"], "pss-binding");
    assert_eq!(first["action"], "Audit");
    assert_eq!(results[1]["binding"], Value::Null);
    assert_eq!(results[2]["related"][1]["source"], Value::Null);
    assert_eq!(
        results[2]["related"][0],
        json!({"object": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "namespace": "blog", "name": "www"},
            "source": {"file": "examples/a.yaml", "line": 20}})
    );
    assert_eq!(v["errors"], json!([]));
}

#[test]
fn json_format_escapes_hostile_text() {
    let mut r = Report::default();
    let mut f = finding("p\"\\", Action::Deny, "a\".yaml", 1, HOSTILE);
    f.object.namespace = None;
    r.results.push(f);
    r.errors.push(InputError {
        file: "e.yaml".into(),
        line: Some(2),
        column: Some(5),
        message: HOSTILE.into(),
    });
    let mut out = Vec::new();
    r.write_json(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains('\u{1b}'));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["results"][0]["message"], HOSTILE);
    assert_eq!(v["results"][0]["policy"], "p\"\\");
    assert_eq!(v["results"][0]["object"]["namespace"], Value::Null);
    assert_eq!(
        v["errors"][0],
        json!({"file": "e.yaml", "line": 2, "column": 5, "message": HOSTILE})
    );
    assert_eq!(v["summary"]["errors"], 1);
}

#[test]
fn sarif_format() {
    let mut r = sample();
    r.errors.push(InputError {
        file: "./bad dir/x.yaml".into(),
        line: Some(4),
        column: Some(2),
        message: "mapping values are not allowed in this context".into(),
    });
    let v = r.to_sarif();
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "interlock");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        vec![
            "hpa-target-exists",
            "pss-baseline",
            "unique-ingress-host",
            "unique-service-selector"
        ]
    );
    let results = run["results"].as_array().unwrap();
    let levels: Vec<&str> = results
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, vec!["note", "warning", "error"]);
    for r in results {
        let id = r["ruleId"].as_str().unwrap();
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[idx], id);
        assert!(r["partialFingerprints"]["interlockFinding/v1"].is_string());
    }
    let deny = &results[2];
    assert_eq!(
        deny["locations"][0]["physicalLocation"],
        json!({"artifactLocation": {"uri": "examples/b.yaml"}, "region": {"startLine": 3}})
    );
    assert_eq!(
        deny["message"]["text"],
        "Ingress shop/web: host \"a.example.com\" is already used (related: Ingress live/x)"
    );
    assert_eq!(deny["relatedLocations"].as_array().unwrap().len(), 1);
    assert_eq!(
        deny["relatedLocations"][0]["message"]["text"],
        "Ingress blog/www"
    );
    let inv = &run["invocations"][0];
    assert_eq!(inv["executionSuccessful"], false);
    assert_eq!(
        inv["toolExecutionNotifications"][0]["locations"][0]["physicalLocation"],
        json!({"artifactLocation": {"uri": "bad%20dir/x.yaml"},
               "region": {"startLine": 4, "startColumn": 2}})
    );
}

#[test]
fn sarif_uris() {
    assert_eq!(sarif_uri("examples/a.yaml"), "examples/a.yaml");
    assert_eq!(sarif_uri("././a b#c%.yaml"), "a%20b%23c%25.yaml");
    assert_eq!(sarif_uri("dir\\a.yaml"), "dir/a.yaml");
    assert_eq!(sarif_uri("<stdin>"), "%3Cstdin%3E");
    assert_eq!(sarif_uri("/nowhere/x.yaml"), "file:///nowhere/x.yaml");
    let cwd = std::env::current_dir().unwrap();
    let inside = cwd.join("sub/x.yaml");
    assert_eq!(sarif_uri(&inside.to_string_lossy()), "sub/x.yaml");
    assert_eq!(sarif_uri("ünï.yaml"), "%C3%BCn%C3%AF.yaml");
}

#[test]
fn junit_format() {
    let mut r = sample();
    r.evaluated.push(Evaluated {
        policy: "hpa-target-exists".into(),
        object: obj("HorizontalPodAutoscaler", Some("shop"), "web"),
        source: loc("examples/a.yaml", 30),
    });
    r.evaluated.push(Evaluated {
        policy: "unique-ingress-host".into(),
        object: obj("Ingress", Some("shop"), "web"),
        source: loc("examples/b.yaml", 3),
    });
    let mut out = Vec::new();
    r.write_junit(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let expected = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="interlock" tests="4" failures="3" errors="0" time="0">
  <testsuite name="hpa-target-exists" tests="1" failures="0" errors="0" skipped="0" time="0">
    <testcase name="HorizontalPodAutoscaler shop/web" classname="hpa-target-exists" file="examples/a.yaml" line="30" time="0"/>
  </testsuite>
  <testsuite name="pss-baseline" tests="1" failures="1" errors="0" skipped="0" time="0">
    <testcase name="Service shop/web" classname="pss-baseline" file="examples/a.yaml" line="1" time="0">
      <failure type="Audit" message="hostPath">examples/a.yaml:1: Audit pss-baseline (binding pss-binding): Service shop/web: hostPath&#10;</failure>
    </testcase>
  </testsuite>
  <testsuite name="unique-ingress-host" tests="1" failures="1" errors="0" skipped="0" time="0">
    <testcase name="Ingress shop/web" classname="unique-ingress-host" file="examples/b.yaml" line="3" time="0">
      <failure type="Deny" message="host &quot;a.example.com&quot; is already used">examples/b.yaml:3: Deny unique-ingress-host: Ingress shop/web: host &quot;a.example.com&quot; is already used&#10;  reason: Invalid&#10;  related: Ingress blog/www at examples/a.yaml:20&#10;  related: Ingress live/x&#10;</failure>
    </testcase>
  </testsuite>
  <testsuite name="unique-service-selector" tests="1" failures="1" errors="0" skipped="0" time="0">
    <testcase name="Service shop/web" classname="unique-service-selector" file="examples/a.yaml" line="9" time="0">
      <failure type="Warn" message="selector is used by another Service">examples/a.yaml:9: Warn unique-service-selector: Service shop/web: selector is used by another Service&#10;</failure>
    </testcase>
  </testsuite>
</testsuites>
"#;
    assert_eq!(text, expected);
}

#[test]
fn junit_escapes_hostile_text_and_lists_errors() {
    let mut r = Report::default();
    r.results
        .push(finding("p<&>", Action::Deny, "a&b.yaml", 1, HOSTILE));
    r.results
        .push(finding("p<&>", Action::Warn, "a&b.yaml", 1, "second"));
    r.errors.push(InputError {
        file: "e\".yaml".into(),
        line: Some(2),
        column: None,
        message: HOSTILE.into(),
    });
    let mut out = Vec::new();
    r.write_junit(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // Nothing XML 1.0 forbids, no markup from the message.
    assert!(!text.chars().any(|c| (c as u32) < 0x20 && c != '\n'));
    assert!(!text.contains("</failure><x"));
    assert!(!text.contains("]]>"));
    assert!(text.contains(r#"<testsuite name="p&lt;&amp;&gt;""#));
    assert!(text.contains(r#"file="a&amp;b.yaml""#));
    assert!(text.contains("&lt;/failure&gt;&lt;x a=&quot;1&quot;&gt;&amp;amp; &apos;q&apos; \\u{1b}[2J\\u{7}\\u{1}&#13;&#10;]]&gt;"));
    // Two findings on one pair: one test case, the worst action as type.
    assert!(text.contains(r#"<failure type="Deny" message="2 violations; first: bad"#));
    assert!(text.contains(r#"<testsuite name="inputs" tests="1" failures="0" errors="1""#));
    assert!(text.contains(r#"<testcase name="e&quot;.yaml:2" classname="inputs""#));
    assert_eq!(text.matches("<testcase ").count(), 2);
    assert_eq!(text.matches("</testcase>").count(), 2);
}

#[test]
fn from_documents_and_load_errors() {
    use crate::manifest::{load_str, Format, LoadOptions, Source};
    let l = load_str(
        Source::file("x.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: shop\n---\nkind: X\n",
        Format::Yaml,
        &LoadOptions::default(),
    );
    let d = &l.documents[0];
    assert_eq!(ObjectRef::from_document(d).to_string(), "ConfigMap shop/a");
    assert_eq!(SourceLocation::from_document(d).to_string(), "x.yaml:1");
    let mut r = Report::default();
    r.add_load_errors(&l.errors);
    assert_eq!(
        r.errors[0].to_string(),
        "x.yaml:7: document has no \"apiVersion\"; every Kubernetes object needs apiVersion and kind"
    );
    assert_eq!(r.exit_code(), 2);
}

/// Notices go to standard error after the errors, as `file:line: note:`,
/// into the JSON `notices` list and SARIF notifications of level `note`,
/// and never change the exit status.
#[test]
fn notices_are_shown_but_do_not_fail_the_run() {
    let mut r = Report {
        objects: 2,
        policies: 1,
        ..Report::default()
    };
    r.notices.push(InputError {
        file: "b.yaml".into(),
        line: Some(4),
        column: None,
        message: "ConfigMap default/a is given 2 times".into(),
    });
    assert_eq!(r.exit_code(), 0);
    let mut err = Vec::new();
    r.write_errors(&mut err).unwrap();
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "b.yaml:4: note: ConfigMap default/a is given 2 times\n"
    );
    assert_eq!(r.to_json()["summary"]["notices"], 1);
    assert_eq!(r.to_json()["notices"][0]["line"], 4);
    let sarif = r.to_sarif();
    let n = &sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"][0];
    assert_eq!(n["level"], "note");
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        true
    );
    assert!(r.summary_line().ends_with("; 1 notice on standard error"));
}
