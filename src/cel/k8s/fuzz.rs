//! No-panic loop over random inputs for every parser in this module.
