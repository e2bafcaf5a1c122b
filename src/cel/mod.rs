//! Kubernetes-dialect CEL: parse, compile, evaluate.
//!
//! ```
//! use interlock::cel::{Activation, Env, Value};
//! let mut env = Env::kubernetes();
//! let object = env.add_variable("object");
//! let program = env.compile("object.spec.replicas > 2").unwrap();
//! let json = serde_json::json!({"spec": {"replicas": 3}});
//! let mut act = Activation::new(&env);
//! act.set(object, Value::from_json(&json));
//! assert!(program.eval(&act).unwrap().equals(&Value::Bool(true)));
//! ```

pub mod ast;
#[cfg(test)]
mod budget_tests;
pub mod checker;
mod compile;
pub mod error;
#[cfg(test)]
mod eval_fuzz_tests;
#[cfg(test)]
mod fidelity_tests;
pub mod flow;
pub mod functions;
#[cfg(test)]
mod fuzz_found_tests;
mod intern;
pub mod interrupt;
pub mod k8s;
pub mod k8s_authz;
mod k8s_bindings;
mod lexer;
pub mod parser;
mod plan;
#[cfg(test)]
mod plan_tests;
mod program;
pub mod schema;
pub mod types;
pub mod value;

pub use compile::{Env, HostFunction, DEFAULT_COST_LIMIT};
pub use error::{CompileError, EvalError, EvalResult};
pub use interrupt::{CancelOnDrop, Interrupt};
pub use plan::Planned;
pub use program::{Activation, Ctx, Host, Program, DEFAULT_MEMORY_LIMIT};
pub use types::Ty;
pub use value::{Json, Key, List, Map, Str, Type, Value};
