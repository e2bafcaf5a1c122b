use super::*;

fn schema(json: &str) -> Schema {
    let mut s: Schema = serde_json::from_str(json).expect("a schema");
    s.normalize();
    s
}

fn typed(root: &str, defs: &[(&str, &str)]) -> Ty {
    let defs: BTreeMap<String, Schema> = defs
        .iter()
        .map(|(n, s)| (n.to_string(), schema(s)))
        .collect();
    resource_type(&schema(root), &defs, "Thing").expect("a type")
}

fn field<'t>(t: &'t Ty, path: &[&str]) -> &'t Ty {
    path.iter().fold(t, |t, f| match t {
        Ty::Struct(s) => s.field(f).unwrap_or_else(|| panic!("no field {f} in {t}")),
        other => panic!("{other} has no fields"),
    })
}

#[test]
fn escapes_property_names_as_kube() {
    assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
    assert_eq!(
        escape("x-y.z/w").as_deref(),
        Some("x__dash__y__dot__z__slash__w")
    );
    assert_eq!(escape("a___b").as_deref(), Some("a__underscores___b"));
    assert_eq!(escape("plain_name1").as_deref(), Some("plain_name1"));
    assert_eq!(escape("1abc"), None);
    assert_eq!(escape("a b"), None);
    assert_eq!(escape(""), None);
}

#[test]
fn types_scalars_formats_lists_and_maps() {
    let t = typed(
        r##"{"type":"object","properties":{
            "n":{"type":"integer","format":"int32"},
            "d":{"type":"number"},
            "b":{"type":"boolean"},
            "bytes":{"type":"string","format":"byte"},
            "when":{"type":"string","format":"date-time"},
            "for":{"type":"string","format":"duration"},
            "ios":{"format":"int-or-string","oneOf":[{"type":"integer"},{"type":"string"}]},
            "ios2":{"x-kubernetes-int-or-string":true},
            "q":{"$ref":"#/components/schemas/Quantity"},
            "limits":{"type":"object","additionalProperties":{"$ref":"#/components/schemas/Quantity"}},
            "labels":{"type":"object","additionalProperties":{"type":"string"}},
            "items":{"type":"array","items":{"allOf":[{"$ref":"#/components/schemas/Item"}],"default":{}}}
        }}"##,
        &[
            (
                "Quantity",
                r#"{"format":"quantity","oneOf":[{"type":"integer"},{"type":"string"}]}"#,
            ),
            (
                "Item",
                r#"{"type":"object","properties":{"name":{"type":"string"}}}"#,
            ),
        ],
    );
    assert_eq!(field(&t, &["n"]), &Ty::Int);
    assert_eq!(field(&t, &["d"]), &Ty::Double);
    assert_eq!(field(&t, &["b"]), &Ty::Bool);
    assert_eq!(field(&t, &["bytes"]), &Ty::Bytes);
    assert_eq!(field(&t, &["when"]), &Ty::Timestamp);
    assert_eq!(field(&t, &["__for__"]), &Ty::Duration);
    assert_eq!(field(&t, &["ios"]), &Ty::Dyn);
    assert_eq!(field(&t, &["ios2"]), &Ty::Dyn);
    assert_eq!(field(&t, &["labels"]), &Ty::map(Ty::String, Ty::String));
    // A schema without a type (a Quantity) is not exposed, nor a map of them.
    let Ty::Struct(root) = &t else { panic!() };
    assert!(root.field("q").is_none() && root.field("limits").is_none());
    let Ty::List(item) = field(&t, &["items"]) else {
        panic!("items is a list")
    };
    assert_eq!(item.to_string(), "Thing.items.@idx");
    assert_eq!(field(item, &["name"]), &Ty::String);
    // The resource root always has kind, apiVersion and metadata.name.
    assert_eq!(field(&t, &["metadata", "generateName"]), &Ty::String);
    assert_eq!(field(&t, &["kind"]), &Ty::String);
}

#[test]
fn a_cycle_of_references_ends_in_an_empty_object() {
    let t = typed(
        r#"{"type":"object","properties":{"node":{"$ref":"Node"}}}"#,
        &[(
            "Node",
            r#"{"type":"object","properties":{"next":{"$ref":"Node"},"v":{"type":"string"}}}"#,
        )],
    );
    let Ty::Struct(next) = field(&t, &["node", "next"]) else {
        panic!("an object")
    };
    assert!(next.fields.is_empty());
    assert_eq!(next.name.as_ref(), "Thing.node.next");
}
