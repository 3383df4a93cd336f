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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let (s, m) = (g.sum_all(x)?, g.reduce_mean(x, None, false)?);
    /// let out = Session::new(&g, &[s, m])?.run_fetched(&[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
    /// assert_eq!(out.get(m)?.scalar_f64()?, 2.0);
    /// assert!(out.get(x).is_err()); // not fetched: an error listing what was
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&self, v: ValueId) -> Result<&Tensor> {
        Ok(&self.tensors[self.position(v)?])
    }

    /// The tensor of the fetch named `name` (see [`Session::named`](super::Session::named)).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let s = g.sum_all(x)?;
    /// let out = Session::named(&g, &[("total", s)])?.run_fetched(&[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
    /// assert_eq!(out.by_name("total")?.scalar_f64()?, 4.0);
    /// assert!(out.by_name("loss").unwrap_err().to_string().contains("'total'"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn by_name(&self, name: &str) -> Result<&Tensor> {
        let i = self.names.iter().position(|n| n.as_deref() == Some(name)).ok_or_else(|| {
            Error::InvalidArgument(format!("fetched: no fetch named '{name}' (fetched: {})", self.listing()))
        })?;
        Ok(&self.tensors[i])
    }

    /// The tensors in fetch order (what [`Session::run`](super::Session::run) returns).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let y = g.neg(x)?;
    /// let out = Session::new(&g, &[x, y])?.run_fetched(&[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
    /// let v = out.into_vec(); // fetch order
    /// assert_eq!(v[1].to_f64_vec(), [-1.0, -3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_vec(self) -> Vec<Tensor> {
        self.tensors
    }

    /// The named fetches' tensors by name (unnamed fetches are left out).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let (s, y) = (g.sum_all(x)?, g.neg(x)?);
    /// let out = Session::named(&g, &[("sum", s), ("neg", y)])?.run_fetched(&[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
    /// let m = out.into_map();
    /// assert_eq!(m["sum"].scalar_f64()?, 4.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_map(self) -> HashMap<String, Tensor> {
        self.names.into_iter().zip(self.tensors).filter_map(|(n, t)| n.map(|n| (n, t))).collect()
    }

    /// How many values were fetched.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let y = g.neg(x)?;
    /// let out = Session::new(&g, &[x, y])?.run_fetched(&[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
    /// assert_eq!(out.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether nothing was fetched.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// assert!(Session::new(&g, &[])?.run_fetched(&[])?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}
