//! The object-count quotas of a namespace against the objects a group
//! would create, decided before any write. A server-side dry run consumes
//! no quota, so every member's dry run passes while the real creates run
//! out part way (issue 36: 3 of 4 ConfigMaps stored). What a cached
//! ResourceQuota settles is refused here, with the quota and its numbers;
//! what it cannot settle (compute resources, scoped quotas, node ports, a
//! quota whose status the quota controller has not filled yet) is left to
//! the API server, whose refusal the executor then reports member by member.

use crate::cel::k8s::quantity::Quantity;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// One object the group would create: its API group, resource (plural)
/// and manifest.
pub struct NewObject<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub object: &'a Value,
}

/// A quota that one pass of creates would exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub quota: String,
    pub namespace: String,
    /// The quota's resource name (`count/configmaps`, `services.loadbalancers`).
    pub resource: String,
    pub hard: i64,
    pub used: i64,
    /// What the group's new objects would add.
    pub wanted: i64,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let room = (self.hard - self.used).max(0);
        write!(
            f,
            "ResourceQuota {}/{} allows {} more {} ({} of {} used) and the group would create {}; nothing was written",
            self.namespace, self.quota, room, self.resource, self.used, self.hard, self.wanted
        )
    }
}

/// The first quota of `quotas` (ResourceQuota objects of the group's
/// namespace, as stored) that `new` would exceed, in name order.
pub fn shortfall(quotas: &[Value], new: &[NewObject<'_>]) -> Option<Shortfall> {
    let mut wanted: BTreeMap<String, i64> = BTreeMap::new();
    for o in new {
        for name in counted_as(o) {
            *wanted.entry(name).or_default() += 1;
        }
    }
    let mut quotas: Vec<&Value> = quotas.iter().filter(|q| !scoped(q)).collect();
    quotas.sort_by_key(|q| str_at(q, "/metadata/name"));
    quotas.into_iter().find_map(|q| exceeded(q, &wanted))
}

fn exceeded(quota: &Value, wanted: &BTreeMap<String, i64>) -> Option<Shortfall> {
    wanted.iter().find_map(|(resource, &n)| {
        // `status.hard` is what admission enforces; until the quota
        // controller has filled it (and `used`), the API server decides.
        let hard = count(quota.pointer("/status/hard")?.get(resource)?)?;
        let used = count(quota.pointer("/status/used")?.get(resource)?)?;
        (used.saturating_add(n) > hard).then(|| Shortfall {
            quota: str_at(quota, "/metadata/name").to_string(),
            namespace: str_at(quota, "/metadata/namespace").to_string(),
            resource: resource.clone(),
            hard,
            used,
            wanted: n,
        })
    })
}

/// A quota with scopes or a scope selector counts only the objects that
/// match them (Pods, mostly, by priority class or QoS): left to the API
/// server.
fn scoped(quota: &Value) -> bool {
    let non_empty = |p: &str| {
        quota
            .pointer(p)
            .is_some_and(|v| !v.is_null() && v != &Value::Array(vec![]))
    };
    non_empty("/spec/scopes") || non_empty("/spec/scopeSelector")
}

/// The quota resource names one new object counts against (Kubernetes'
/// object-count evaluators).
fn counted_as(o: &NewObject<'_>) -> Vec<String> {
    let mut names = vec![match o.group {
        "" => format!("count/{}", o.resource),
        g => format!("count/{}.{g}", o.resource),
    }];
    if o.group.is_empty() {
        // The short names of the core kinds that had quotas before
        // `count/*` existed.
        const LEGACY: [&str; 7] = [
            "pods",
            "services",
            "replicationcontrollers",
            "resourcequotas",
            "secrets",
            "configmaps",
            "persistentvolumeclaims",
        ];
        if LEGACY.contains(&o.resource) {
            names.push(o.resource.to_string());
        }
        if o.resource == "services"
            && o.object.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
        {
            names.push("services.loadbalancers".into());
        }
    }
    names
}

fn count(v: &Value) -> Option<i64> {
    Quantity::parse(v.as_str()?).ok()?.as_integer().ok()
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(name: &str, hard: Value, used: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ResourceQuota",
               "metadata": {"name": name, "namespace": "team-a"},
               "spec": {"hard": hard.clone()},
               "status": {"hard": hard, "used": used}})
    }

    fn configmap() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    }

    fn new<'a>(group: &'a str, resource: &'a str, object: &'a Value) -> NewObject<'a> {
        NewObject {
            group,
            resource,
            object,
        }
    }

    #[test]
    fn four_configmaps_against_room_for_three_name_the_quota_and_the_numbers() {
        let cm = configmap();
        let four: Vec<_> = (0..4).map(|_| new("", "configmaps", &cm)).collect();
        let q = quota(
            "objects",
            json!({"count/configmaps": "10"}),
            json!({"count/configmaps": "7"}),
        );
        let s = shortfall(std::slice::from_ref(&q), &four).expect("exceeded");
        assert_eq!((s.hard, s.used, s.wanted), (10, 7, 4));
        assert_eq!(
            s.to_string(),
            "ResourceQuota team-a/objects allows 3 more count/configmaps (7 of 10 used) \
             and the group would create 4; nothing was written"
        );
        assert_eq!(shortfall(&[q], &four[..3]), None, "three fit");
    }

    #[test]
    fn legacy_names_api_groups_and_load_balancers_count_too() {
        let cm = configmap();
        let q = quota(
            "legacy",
            json!({"configmaps": "1"}),
            json!({"configmaps": "1"}),
        );
        assert_eq!(
            shortfall(&[q], &[new("", "configmaps", &cm)]).map(|s| s.resource),
            Some("configmaps".into())
        );
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        let q = quota(
            "apps",
            json!({"count/deployments.apps": "2"}),
            json!({"count/deployments.apps": "2"}),
        );
        assert!(shortfall(&[q], &[new("apps", "deployments", &d)]).is_some());
        let lb = json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}});
        let ip = json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "ClusterIP"}});
        let q = quota(
            "lb",
            json!({"services.loadbalancers": "0"}),
            json!({"services.loadbalancers": "0"}),
        );
        assert!(shortfall(std::slice::from_ref(&q), &[new("", "services", &lb)]).is_some());
        assert!(shortfall(&[q], &[new("", "services", &ip)]).is_none());
    }

    #[test]
    fn what_the_cache_cannot_settle_is_left_to_the_api_server() {
        let cm = configmap();
        let one = [new("", "configmaps", &cm)];
        // Compute resources: not an object count.
        let q = quota(
            "cpu",
            json!({"requests.cpu": "0"}),
            json!({"requests.cpu": "0"}),
        );
        assert_eq!(shortfall(&[q], &one), None);
        // Scoped quotas count only what matches their scopes.
        let mut q = quota(
            "scoped",
            json!({"configmaps": "0"}),
            json!({"configmaps": "0"}),
        );
        q["spec"]["scopes"] = json!(["BestEffort"]);
        assert_eq!(shortfall(&[q], &one), None);
        // A new quota the quota controller has not counted yet.
        let mut q = quota("new", json!({"configmaps": "0"}), json!({}));
        q["status"] = json!({});
        assert_eq!(shortfall(&[q], &one), None);
        // Quantities in their suffixed forms.
        let q = quota(
            "k",
            json!({"configmaps": "1k"}),
            json!({"configmaps": "999"}),
        );
        assert_eq!(shortfall(std::slice::from_ref(&q), &one), None);
        assert!(shortfall(
            &[q],
            &[new("", "configmaps", &cm), new("", "configmaps", &cm)]
        )
        .is_some());
    }
}
