pub mod k8s;
