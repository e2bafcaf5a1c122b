use crate::manifest::{load_str, Format, LoadOptions, Source};

/// The committed manifest is what the binary prints, and reads back as
/// the CRD the types generate.
#[test]
fn the_committed_crd_is_the_generated_one() {
    let committed = include_str!("../../manifests/base/crd-resourcegroup.yaml");
    assert_eq!(
        committed,
        super::crd_yaml(),
        "run `interlock crd ResourceGroup > manifests/base/crd-resourcegroup.yaml`"
    );
    let loaded = load_str(
        Source::Stdin,
        committed,
        Format::Yaml,
        &LoadOptions::default(),
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let read: Vec<_> = loaded.documents.into_iter().map(|d| d.value).collect();
    assert_eq!(read, super::crd::crds());
}

#[test]
fn the_crd_has_the_contracted_shape() {
    let crd = &super::crd::crds()[0];
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(
        crd["spec"]["names"]["shortNames"],
        serde_json::json!(["rg"])
    );
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["Valid", "Applied", "Ready", "Reason", "Age"]);
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["serviceAccountName"]));
    let items = &spec["properties"]["resources"]["items"];
    assert_eq!(items["x-kubernetes-embedded-resource"], true);
    assert_eq!(items["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(spec["properties"]["resources"]["maxItems"], 100);
    assert_eq!(spec["properties"]["prune"]["default"], true);
    assert_eq!(spec["properties"]["deletionPolicy"]["default"], "Delete");
}

/// KEP-3659's id, checked against an independent computation
/// (Python: base64.urlsafe_b64encode(sha256(b"storefront.team-a.ResourceGroup.interlock.dev")).rstrip("=")).
#[test]
fn applyset_id_follows_kep_3659() {
    assert_eq!(
        super::applyset_id("team-a", "storefront"),
        APPLYSET_ID_STOREFRONT
    );
}

const APPLYSET_ID_STOREFRONT: &str = "applyset-ncKrovqQN3pHkKSkz2uVSrGCOxr846aS3cVYkPDUzzs-v1";
