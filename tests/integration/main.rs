//! The integration tests, as one binary: one link of kube, axum and the
//! library instead of one per file. Each module is what used to be a
//! `tests/*.rs` file; run one with `cargo test --test integration MODULE::`.
//!
//! The CEL conformance suite stays its own binary (`tests/cel_conformance.rs`):
//! `scripts/test.sh` runs it first for its pass-rate table.

#[path = "../support/mod.rs"]
mod support;

mod admission_robustness;
mod api_tls;
mod architecture;
mod audit_cli;
mod audit_e2e;
mod audit_live;
mod author_eval_interactive;
mod author_exceptions_crd;
mod author_test_against_cluster;
mod authoring;
mod authoring_exceptions;
mod authz_serve;
mod cel_creation_e2e;
mod cel_fuzz_differential;
mod cel_robustness;
mod celwarn_differential;
mod celwarn_fuzz;
mod celwarn_schemas;
mod chart;
mod control_plane;
mod controller;
mod controller_faults;
mod controller_replicas;
mod controller_scale;
mod controller_shards;
mod ctrlauthz_controller;
mod defaults_apiserver;
mod group_plan;
mod group_quota;
mod group_ready_when;
mod group_wait_drift;
mod image;
mod install;
mod listeners;
mod map_creation;
mod map_differential;
mod namespace_policies;
mod policies;
mod policy_objects;
mod prereq;
mod projection;
mod reliability;
mod render;
mod resource_group;
mod resource_group_crd;
mod server_tls;
mod vap_differential;
mod webhook;
mod webhook_relist;
mod webhook_reload;
