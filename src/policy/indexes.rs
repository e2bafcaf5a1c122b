//! The indexes a policy set declares. Compiling a set declares them in the
//! set, not in an inventory: whoever serves the set declares them in its
//! inventory ([`Inventory::set_indexes`](crate::inventory::Inventory::set_indexes)),
//! so that compiling never touches live state and a reload that drops a
//! policy drops its index.

use super::PolicySet;
use crate::cel::{CompileError, Env, Program};
use crate::inventory::IndexDecl;

/// One declared index with its key program (the projection follows what
/// the program reads of the indexed objects).
pub(super) struct DeclaredIndex {
    pub(super) decl: IndexDecl,
    pub(super) program: Program,
    /// The slot of `object` in the program.
    pub(super) slot: usize,
}

impl DeclaredIndex {
    /// Compiles the key expression as the inventory will.
    pub(super) fn compile(decl: IndexDecl) -> Result<DeclaredIndex, CompileError> {
        let env = Env::interlock().with_variables(&["object"]);
        let program = env.compile(&decl.keys)?;
        let slot = env.variable_slot("object").unwrap_or(0);
        Ok(DeclaredIndex {
            decl,
            program,
            slot,
        })
    }
}

impl PolicySet {
    /// The indexes the policies declared, in [`IndexId`](crate::inventory::IndexId)
    /// order: an inventory that serves this set declares exactly these.
    pub fn index_decls(&self) -> Vec<IndexDecl> {
        self.indexes.iter().map(|i| i.decl.clone()).collect()
    }
}
