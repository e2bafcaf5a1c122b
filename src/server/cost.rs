//! What a request will cost to evaluate, estimated before it is queued,
//! so that the executor's heavy lane ([`super::executor`]) is chosen by
//! cost rather than by size alone.
//!
//! **Why an estimate, and why these weights.** Size alone missed the
//! costly small bodies of issue 36: a 125 KB dry-run Pod of 130 containers
//! with ten `configMapKeyRef`s each is under the 128 KiB size threshold and
//! cost 0.5 to 0.7 CPU-seconds against the bundled library, so eight client
//! loops of it held every evaluation thread and a Lease review waited
//! seconds. What makes the library expensive is not bytes but what its
//! policies iterate and look up:
//! - **References** (`configMapKeyRef`, `secretKeyRef`, `configMapRef`,
//!   `secretRef`, and the `configMap`, `secret`, `persistentVolumeClaim`
//!   volume sources): each is an inventory lookup and a pass over the
//!   others (pod-references-exist measured 10 KB → 10 ms, 86 KB → 300 ms).
//!   One weighs [`REFERENCE`] bytes, but only when some loaded policy that
//!   reads the inventory matches the review's kind
//!   ([`Reviewer::reads_inventory`]): without one, nothing looks a
//!   reference up, and a ConfigMap that merely mentions them is a plain
//!   body.
//! - **Containers** (each `"image"` key): every pod policy loops over the
//!   containers and checks several fields of each. One weighs
//!   [`CONTAINER`] bytes whatever the kind, since policies that do not
//!   read the inventory loop over them too.
//! - **Bytes**: parsing and copying, and the fields nothing above counts.
//!
//! The weights are deliberately rough and err toward "heavy": a request
//! wrongly sent to the heavy lane only loses the thread reserved for light
//! ones (it still runs, in turn with other heavy ones), while a costly one
//! wrongly kept light can hold a thread that cheap requests need. An
//! ordinary Pod (a few containers, a dozen references) estimates at a few
//! KiB to a few tens of KiB, far under the threshold; the Pod at
//! well over a MiB.
//!
//! The keys are found by a byte scan for the quoted key followed by its
//! closing quote and a colon, so a key's text as a value, or inside a JSON
//! string (where its quotes are escaped), does not count. A client can
//! still write bodies that inflate the estimate, which only sends its own
//! request to the heavy lane, or find a costly shape the scan does not
//! see; the cost budget and the deadline bound those, as they bound
//! everything. The test of the guarantee is
//! `server_tls::cost_lane::cheap_reviews_are_not_queued_behind_costly_small_ones`
//! (docs/admission.md).

use super::executor::{Lane, HEAVY_COST};
use super::Reviewer;

/// Bytes one reference weighs when a policy that reads the inventory
/// matches the kind. Less than a reference costs (1 KiB of plain body is
/// microseconds, a looked-up reference in a costly Pod a good share of a
/// millisecond in a debug build), but enough that a few hundred references
/// make a small body heavy while an ordinary Pod's dozen do not.
pub(crate) const REFERENCE: u64 = 1024;

/// Bytes one container weighs.
pub(crate) const CONTAINER: u64 = 256;

/// Keys whose value names another object of the namespace.
const REFERENCE_KEYS: &[&[u8]] = &[
    b"\"configMapKeyRef\"",
    b"\"secretKeyRef\"",
    b"\"configMapRef\"",
    b"\"secretRef\"",
    b"\"configMap\"",
    b"\"secret\"",
    b"\"persistentVolumeClaim\"",
];

/// One key per container (init and ephemeral ones included).
const CONTAINER_KEY: &[u8] = b"\"image\"";

/// What the byte scan found in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub references: u64,
    pub containers: u64,
}

/// Count the keys of [`REFERENCE_KEYS`] and [`CONTAINER_KEY`] in `body`.
/// One pass: every key starts with `"`, so only those positions are tried.
pub(crate) fn counts(body: &[u8]) -> Counts {
    let mut c = Counts {
        references: 0,
        containers: 0,
    };
    for at in memchr::memchr_iter(b'"', body) {
        let rest = &body[at..];
        if is_key(rest, CONTAINER_KEY) {
            c.containers += 1;
        } else if REFERENCE_KEYS.iter().any(|k| is_key(rest, k)) {
            c.references += 1;
        }
    }
    c
}

/// `rest` starts with `key` used as an object's key (a `:` follows), not
/// as a string value.
fn is_key(rest: &[u8], key: &[u8]) -> bool {
    rest.strip_prefix(key).is_some_and(|after| {
        after
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b':')
    })
}

/// The estimated cost of evaluating `body`, in bytes of plain body:
/// its length, plus its containers, plus its references when
/// `reads_inventory` (a policy that looks objects up matches its kind).
pub(crate) fn estimate(body: &[u8], reads_inventory: bool) -> u64 {
    let c = counts(body);
    let references = if reads_inventory { c.references } else { 0 };
    (body.len() as u64)
        .saturating_add(c.containers.saturating_mul(CONTAINER))
        .saturating_add(references.saturating_mul(REFERENCE))
}

/// Where a review is evaluated: in the heavy lane when its estimated cost
/// is over [`HEAVY_COST`], and as whose request (the review's `request.userInfo.username`, for fairness among tenants; empty
/// if the body does not say). One pass over the body that skips everything
/// but those few fields, and one byte scan; the evaluation parses it again.
pub(crate) fn lane(body: &[u8], reviewer: &dyn Reviewer) -> Lane {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Request>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Request {
        user_info: Option<User>,
        kind: Option<Kind>,
        namespace: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct User {
        username: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        group: String,
        #[serde(default)]
        version: String,
        #[serde(default)]
        kind: String,
    }
    let request = serde_json::from_slice::<Review>(body)
        .ok()
        .and_then(|r| r.request);
    let (tenant, reads) = match request {
        // Not a review: it is answered 400 after a parse, cheap whatever
        // its content.
        None => (String::new(), false),
        Some(r) => {
            let reads = r.kind.is_some_and(|k| {
                let api_version = if k.group.is_empty() {
                    k.version
                } else {
                    format!("{}/{}", k.group, k.version)
                };
                let namespaced = r.namespace.is_some_and(|n| !n.is_empty());
                reviewer.reads_inventory(&api_version, &k.kind, namespaced)
            });
            (
                r.user_info.and_then(|u| u.username).unwrap_or_default(),
                reads,
            )
        }
    };
    Lane {
        heavy: estimate(body, reads) > HEAVY_COST,
        tenant,
    }
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
