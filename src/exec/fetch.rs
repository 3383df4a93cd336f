//! Outputs of a run looked up by what was fetched, not by position: [`Fetched`].
//!
//! Invariants: a [`Fetched`] holds exactly one tensor per fetch of its session, in the
//! session's fetch order; a lookup of a value or name that was not fetched is an `Err`
//! naming it and listing what was fetched, never another fetch's tensor. Names are the
//! ones given to [`Session::named`](super::Session::named) (unique per session); a session
//! built from bare values has none.

use hashbrown::HashMap;

use crate::error::{Error, Result};
use crate::ir::ValueId;
use crate::tensor::Tensor;

/// The outputs of one [`Session::run_fetched`](super::Session::run_fetched): index it by the
/// [`ValueId`] you fetched (`out.get(loss)?`) or by its name (`out.by_name("loss")?`).
#[derive(Clone, Debug)]
pub struct Fetched {
    values: Vec<ValueId>,
    names: Vec<Option<String>>,
    tensors: Vec<Tensor>,
}

impl Fetched {
    pub(crate) fn new(values: Vec<ValueId>, names: Vec<Option<String>>, tensors: Vec<Tensor>) -> Fetched {
        Fetched { values, names, tensors }
    }

    fn listing(&self) -> String {
        let items: Vec<String> = self
            .values
            .iter()
            .zip(&self.names)
            .map(|(v, n)| match n {
                Some(n) => format!("'{n}' ({v})"),
                None => v.to_string(),
            })
            .collect();
        items.join(", ")
    }

    fn position(&self, v: ValueId) -> Result<usize> {
        self.values.iter().position(|&f| f == v).ok_or_else(|| {
            Error::InvalidArgument(format!("fetched: {v} was not fetched (fetched: {})", self.listing()))
        })
    }

    /// The tensor of the fetched value `v`.
    pub fn get(&self, v: ValueId) -> Result<&Tensor> {
        Ok(&self.tensors[self.position(v)?])
    }

    /// The tensor of the fetch named `name` (see [`Session::named`](super::Session::named)).
    pub fn by_name(&self, name: &str) -> Result<&Tensor> {
        let i = self.names.iter().position(|n| n.as_deref() == Some(name)).ok_or_else(|| {
            Error::InvalidArgument(format!("fetched: no fetch named '{name}' (fetched: {})", self.listing()))
        })?;
        Ok(&self.tensors[i])
    }

    /// The tensors in fetch order (what [`Session::run`](super::Session::run) returns).
    pub fn into_vec(self) -> Vec<Tensor> {
        self.tensors
    }

    /// The named fetches' tensors by name (unnamed fetches are left out).
    pub fn into_map(self) -> HashMap<String, Tensor> {
        self.names.into_iter().zip(self.tensors).filter_map(|(n, t)| n.map(|n| (n, t))).collect()
    }

    /// How many values were fetched.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether nothing was fetched.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}
