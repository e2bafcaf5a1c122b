//! Kubernetes vocabulary shared by every layer: kinds, their resources and
//! scope. Offline (`check`) this table is all there is; the live front-ends
//! ask discovery, which this module does not do.

pub mod apply;
pub mod defaults;
pub mod duration;
pub mod kind;
pub mod kinds;
pub mod openapi;
pub mod pod_template;
