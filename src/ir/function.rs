//! Functions (sub-graphs with parameter and result lists) and the shared [`Library`] of
//! named functions and variables.
//!
//! Invariants: a `Function`'s params are `Input` nodes of its own graph, in order; its
//! results are values of that graph. Captured outer values are never referenced directly:
//! they are passed as explicit inputs of the op that owns the function (builders that
//! capture automatically add them there, see `ir::scope`). Named functions
//! are declared (signature) before they are defined (body), so bodies may call themselves
//! or each other recursively; `Call` nodes are type-checked against the declaration.
//! A function may carry an opaque origin record left by the pass that generated it
//! (`Function::origin`); nothing that runs or differentiates a function reads it, and
//! a deep copy ([`Clone`]) or anything derived from the function does not inherit it.
//! Every function has a process-wide unique [`Function::id`] (a copy gets a fresh one):
//! the executor keys the plans it compiles for function bodies by it (`exec::plans`); the
//! IR itself caches nothing.
//!
//! The same pass may attach a derivative hook (`Function::derivative`, see
//! `ir/derivative.rs`): autodiff differentiates the node owning the function with it
//! instead of the op's generic rule; it is not inherited either.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use hashbrown::HashMap;

use super::{DerivativeHook, Graph, ValueId};
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorType};

/// A sub-graph with ordered parameters and results.
///
/// Built only by [`Function::build`] or [`Function::from_parts`], which validate every
/// handle; the fields are read through accessors, so a function cannot be changed after
/// validation (or after its plan was compiled):
///
/// ```compile_fail
/// # use pfor::prelude::*;
/// let g = Graph::new();
/// let mut f = Function::build(&g, &[], |_, _| Ok(vec![])).unwrap();
/// f.results.push(f.params[0]); // private: use Function::results()
/// ```
pub struct Function {
    /// The body.
    pub(crate) graph: Graph,
    /// Parameter values (Input nodes of `graph`), in order.
    pub(crate) params: Vec<ValueId>,
    /// Result values, in order.
    pub(crate) results: Vec<ValueId>,
    /// Process-wide unique identity (see [`Function::id`]).
    id: u64,
    /// What generated this function, when a pass recorded it (see `Function::origin`).
    origin: Option<Arc<dyn Any + Send + Sync>>,
    /// How to differentiate the node owning this function, when its pass said so.
    derivative: Option<Arc<dyn DerivativeHook>>,
}

impl Clone for Function {
    fn clone(&self) -> Self {
        Function {
            graph: self.graph.clone(),
            params: self.params.clone(),
            results: self.results.clone(),
            id: fresh_id(),
            origin: None,
            derivative: None,
        }
    }
}

/// A process-wide unique function id (never reused, never 0).
fn fresh_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Function({} params, {} results, {} nodes)",
            self.params.len(),
            self.results.len(),
            self.graph.num_nodes()
        )
    }
}

impl PartialEq for Function {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Function {
    /// Build a function in a child graph of `parent` (sharing its library): the closure
    /// receives the child graph and the parameter values and returns the results. The body
    /// sees only its own values: `parent`'s values must come in as parameters (the
    /// `Graph::cond` / `Graph::while_loop` builders capture them instead).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// let r = pfor::run_function(&f, vec![Tensor::vec1(&[1.0f64, 2.0]), Tensor::vec1(&[3.0f64, 4.0])])?;
    /// assert_eq!(r[0].to_f64_vec(), [3.0, 8.0]);
    /// // a value of the parent graph cannot be used in the body
    /// let mut h = Graph::new();
    /// let outer = h.constant(Tensor::scalar(1.0f64));
    /// let ty = [TensorType::new(DType::F64, Shape::scalar())];
    /// assert!(Function::build(&h, &ty, |g, p| Ok(vec![g.add(p[0], outer)?])).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn build(
        parent: &Graph,
        param_types: &[TensorType],
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Function> {
        let mut g = parent.new_child();
        let params = super::scope::add_params(&mut g, param_types);
        let results = body(&mut g, &params)?;
        for r in &results {
            g.check_value(*r)?;
        }
        Ok(Function { graph: g, params, results, id: fresh_id(), origin: None, derivative: None })
    }

    /// Assemble a function from an existing graph.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut body = Graph::new();
    /// let x = body.input("x", DType::F32, [3]);
    /// let y = body.exp(x)?;
    /// let f = Function::from_parts(body, vec![x], vec![y])?;
    /// assert_eq!(f.signature().results, [TensorType::new(DType::F32, [3])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_parts(graph: Graph, params: Vec<ValueId>, results: Vec<ValueId>) -> Result<Function> {
        for v in params.iter().chain(&results) {
            graph.check_value(*v)?;
        }
        for p in &params {
            if !matches!(graph.node(p.node)?.op, crate::ops::Op::Input { .. }) {
                return Err(Error::InvalidArgument(format!("function parameter {p} is not an Input node")));
            }
        }
        Ok(Function { graph, params, results, id: fresh_id(), origin: None, derivative: None })
    }

    /// This function with an origin record: how the pass that built it derived it (pfor's
    /// Subset form records the per-iteration functions it vectorized, so that an enclosing
    /// pfor can vectorize them again). Opaque to the IR, the executor and autodiff.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use std::sync::Arc;
    ///
    /// let ty = [TensorType::new(DType::F64, [2])];
    /// let f = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// let f = f.with_origin(Arc::new("made by my pass".to_string()));
    /// assert_eq!(f.origin::<String>().map(String::as_str), Some("made by my pass"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_origin(mut self, origin: Arc<dyn Any + Send + Sync>) -> Function {
        self.origin = Some(origin);
        self
    }

    /// The origin record of type `T`, if one was attached ([`Function::with_origin`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let ty = [TensorType::new(DType::F64, [2])];
    /// let f = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// assert!(f.origin::<String>().is_none()); // none attached
    /// # Ok(())
    /// # }
    /// ```
    pub fn origin<T: Any>(&self) -> Option<&T> {
        self.origin.as_deref()?.downcast_ref::<T>()
    }

    /// This function's process-wide unique identity: never shared with another function,
    /// not even a copy ([`Clone`] gives a fresh one), so what is cached under it (the
    /// executor's compiled plans) can never be taken for another function's.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_ne!(f.id(), f.clone().id()); // a clone is another function for the plan cache
    /// # Ok(())
    /// # }
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// This function with a derivative hook: autodiff differentiates the node owning it
    /// with `hook` instead of the op's generic rule (see `ir/derivative.rs`).
    pub fn with_derivative(mut self, hook: Arc<dyn DerivativeHook>) -> Function {
        self.derivative = Some(hook);
        self
    }

    /// The derivative hook, if one was attached ([`Function::with_derivative`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let ty = [TensorType::new(DType::F64, [2])];
    /// let f = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// assert!(f.derivative().is_none()); // the generic rules apply (see `with_derivative`)
    /// # Ok(())
    /// # }
    /// ```
    pub fn derivative(&self) -> Option<&Arc<dyn DerivativeHook>> {
        self.derivative.as_ref()
    }

    /// The body.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_eq!(f.graph().num_nodes(), 3); // two parameters and the mul
    /// # Ok(())
    /// # }
    /// ```
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Parameter values (Input nodes of [`Function::graph`]), in order.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_eq!(f.params().len(), 2);
    /// assert_eq!(f.graph().inputs(), f.params());
    /// # Ok(())
    /// # }
    /// ```
    pub fn params(&self) -> &[ValueId] {
        &self.params
    }

    /// Result values, in order.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_eq!(f.graph().value_type(f.results()[0])?.to_string(), "f64[2]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn results(&self) -> &[ValueId] {
        &self.results
    }

    /// Parameter types.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_eq!(f.param_types(), [TensorType::new(DType::F64, [2]), TensorType::new(DType::F64, [2])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn param_types(&self) -> Vec<TensorType> {
        self.params.iter().map(|p| self.graph.value_type(*p).cloned().expect("param exists")).collect()
    }

    /// Result types.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// assert_eq!(f.result_types(), [TensorType::new(DType::F64, [2])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn result_types(&self) -> Vec<TensorType> {
        self.results.iter().map(|r| self.graph.value_type(*r).cloned().expect("result exists")).collect()
    }

    /// Signature.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
    /// let sig = f.signature();
    /// assert_eq!((sig.params.len(), sig.results.len()), (2, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn signature(&self) -> FunctionSignature {
        FunctionSignature { params: self.param_types(), results: self.result_types() }
    }
}

/// Parameter and result types of a named function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSignature {
    /// Parameter types.
    pub params: Vec<TensorType>,
    /// Result types.
    pub results: Vec<TensorType>,
}

/// A variable's definition: its name and initial value (type fixed by it).
#[derive(Clone, Debug)]
pub struct VariableDef {
    /// Name.
    pub name: String,
    /// Initial value.
    pub init: Tensor,
}

#[derive(Default)]
struct LibraryInner {
    sigs: HashMap<String, FunctionSignature>,
    defs: HashMap<String, Arc<Function>>,
    vars: HashMap<String, VariableDef>,
    var_order: Vec<String>,
}

/// Named functions and variables shared by a graph and all its child graphs.
#[derive(Clone, Default)]
pub struct Library {
    inner: Arc<RwLock<LibraryInner>>,
}

fn poisoned() -> Error {
    Error::InvalidArgument("function library lock poisoned by an earlier panic".into())
}

impl Library {
    /// Declare a function's signature (needed before a recursive body can call it).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ir::FunctionSignature;
    ///
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::I64, Shape::scalar());
    /// g.library().declare("f", FunctionSignature { params: vec![t.clone()], results: vec![t] })?;
    /// assert!(g.library().get("f").is_err()); // declared, not yet defined
    /// # Ok(())
    /// # }
    /// ```
    pub fn declare(&self, name: &str, sig: FunctionSignature) -> Result<()> {
        let mut l = self.inner.write().map_err(|_| poisoned())?;
        if let Some(old) = l.sigs.get(name)
            && *old != sig
        {
            return Err(Error::InvalidArgument(format!("function '{name}' redeclared with a different signature")));
        }
        l.sigs.insert(name.to_string(), sig);
        Ok(())
    }

    /// Define a declared (or new) function; its signature must match the declaration.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = TensorType::new(DType::F64, Shape::scalar());
    /// let f = Function::build(&g, &[t], |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// g.library().define("neg", f)?;
    /// assert_eq!(g.library().function_names(), ["neg"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn define(&self, name: &str, f: Function) -> Result<()> {
        let sig = f.signature();
        let mut l = self.inner.write().map_err(|_| poisoned())?;
        if let Some(old) = l.sigs.get(name) {
            let ok = old.params.len() == sig.params.len()
                && old.results.len() == sig.results.len()
                && old.params.iter().zip(&sig.params).all(|(a, b)| a.dtype == b.dtype && a.shape.compatible(&b.shape))
                && old
                    .results
                    .iter()
                    .zip(&sig.results)
                    .all(|(a, b)| a.dtype == b.dtype && a.shape.compatible(&b.shape));
            if !ok {
                return Err(Error::InvalidArgument(format!(
                    "function '{name}': body signature {sig:?} does not match declaration {old:?}"
                )));
            }
        } else {
            l.sigs.insert(name.to_string(), sig);
        }
        if l.defs.contains_key(name) {
            return Err(Error::InvalidArgument(format!("function '{name}' is already defined")));
        }
        l.defs.insert(name.to_string(), Arc::new(f));
        Ok(())
    }

    /// The signature of a declared function.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.function("id", &[TensorType::new(DType::F32, [2])], |_, p| Ok(p.to_vec()))?;
    /// assert_eq!(g.library().signature("id")?.params, [TensorType::new(DType::F32, [2])]);
    /// assert!(g.library().signature("nope").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn signature(&self, name: &str) -> Result<FunctionSignature> {
        let l = self.inner.read().map_err(|_| poisoned())?;
        l.sigs.get(name).cloned().ok_or_else(|| Error::UnknownFunction { name: name.to_string() })
    }

    /// The body of a defined function.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.function("id", &[TensorType::new(DType::F32, [2])], |_, p| Ok(p.to_vec()))?;
    /// assert_eq!(g.library().get("id")?.params().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&self, name: &str) -> Result<Arc<Function>> {
        let l = self.inner.read().map_err(|_| poisoned())?;
        l.defs.get(name).cloned().ok_or_else(|| Error::UnknownFunction { name: name.to_string() })
    }

    /// Names of defined functions, sorted.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = [TensorType::new(DType::F32, [2])];
    /// g.function("b", &t, |_, p| Ok(p.to_vec()))?;
    /// g.function("a", &t, |_, p| Ok(p.to_vec()))?;
    /// assert_eq!(g.library().function_names(), ["a", "b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn function_names(&self) -> Vec<String> {
        let l = match self.inner.read() {
            Ok(l) => l,
            Err(_) => return vec![],
        };
        let mut v: Vec<String> = l.defs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Every declared signature (defined or not), sorted by name (for serialization).
    pub(crate) fn declarations(&self) -> Result<Vec<(String, FunctionSignature)>> {
        let l = self.inner.read().map_err(|_| poisoned())?;
        let mut v: Vec<(String, FunctionSignature)> = l.sigs.iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v)
    }

    /// Add a variable.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// g.library().add_variable("w", Tensor::zeros(DType::F32, &[3])?)?;
    /// assert!(g.library().add_variable("w", Tensor::scalar(0.0f32)).is_err()); // one definition
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_variable(&self, name: &str, init: Tensor) -> Result<()> {
        let mut l = self.inner.write().map_err(|_| poisoned())?;
        if l.vars.contains_key(name) {
            return Err(Error::InvalidArgument(format!("variable '{name}' already exists")));
        }
        l.vars.insert(name.to_string(), VariableDef { name: name.to_string(), init });
        l.var_order.push(name.to_string());
        Ok(())
    }

    /// A variable's definition.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("w", Tensor::vec1(&[1.0f32]))?;
    /// assert_eq!(g.library().variable("w")?.init, Tensor::vec1(&[1.0f32]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn variable(&self, name: &str) -> Result<VariableDef> {
        let l = self.inner.read().map_err(|_| poisoned())?;
        l.vars.get(name).cloned().ok_or_else(|| Error::UnknownVariable { name: name.to_string() })
    }

    /// All variables in creation order.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("a", Tensor::scalar(0i64))?;
    /// g.variable("b", Tensor::scalar(0i64))?;
    /// let names: Vec<String> = g.library().variables().into_iter().map(|v| v.name).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn variables(&self) -> Vec<VariableDef> {
        match self.inner.read() {
            Ok(l) => l.var_order.iter().map(|n| l.vars[n].clone()).collect(),
            Err(_) => vec![],
        }
    }

    /// True if both handles share the same library.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// assert!(g.library().same(g.new_child().library()));
    /// assert!(!g.library().same(Graph::new().library()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn same(&self, other: &Library) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
