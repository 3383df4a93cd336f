//! The converter registry: a value mapping op keys to converters.

use std::fmt;
use std::sync::Arc;

use hashbrown::HashMap;

use super::{ConvertCtx, Wrapped};
use crate::error::{Error, Result};
use crate::ir::ValueId;
use crate::ops::OpKind;

/// Registry key: a built-in op kind or a custom op's name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKey {
    /// A built-in op.
    Builtin(OpKind),
    /// A custom op, by [`CustomOp::name`](crate::ops::CustomOp::name).
    Custom(String),
}

impl fmt::Display for OpKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpKey::Builtin(k) => write!(f, "{k}"),
            OpKey::Custom(n) => write!(f, "custom:{n}"),
        }
    }
}

/// The outcome of a converter.
#[derive(Clone, Debug)]
pub enum Converted {
    /// The converted outputs, one per op output.
    Done(Vec<Wrapped>),
    /// This input pattern is not handled (the reason is reported by the fallback).
    Unhandled(String),
}

impl Converted {
    /// One stacked output (the common case): `Converted::stacked(y)` is
    /// `Converted::stacked(y)`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{ConvertCtx, Converted};
    ///
    /// // a converter for an elementwise op: apply it to the stacked input as is
    /// let conv = |ctx: &mut ConvertCtx<'_>| {
    ///     let x = ctx.stacked(0)?;
    ///     let op = ctx.op().clone();
    ///     Converted::stacked(ctx.add(op, &[x])?)
    /// };
    /// # let _ = conv;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stacked(y: ValueId) -> Result<Converted> {
        Ok(Converted::Done(vec![Wrapped::stacked(y)]))
    }
    /// One output, stacked or loop-invariant.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{ConvertCtx, Converted};
    ///
    /// // pass a loop-invariant input through unchanged (an identity-like op)
    /// let conv = |ctx: &mut ConvertCtx<'_>| {
    ///     let w = ctx.input(0);
    ///     Converted::one(w.value, w.stacked)
    /// };
    /// # let _ = conv;
    /// # Ok(())
    /// # }
    /// ```
    pub fn one(y: ValueId, stacked: bool) -> Result<Converted> {
        Ok(Converted::Done(vec![Wrapped { value: y, stacked }]))
    }
}

/// A pfor converter for one op kind.
pub trait Converter: Send + Sync {
    /// Convert the node described by `ctx`.
    fn convert(&self, ctx: &mut ConvertCtx<'_>) -> Result<Converted>;
}

impl<F> Converter for F
where
    F: Fn(&mut ConvertCtx<'_>) -> Result<Converted> + Send + Sync,
{
    fn convert(&self, ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
        self(ctx)
    }
}

/// Converters by op key. A value: build one, register more, pass it in `PforOptions`.
#[derive(Clone, Default)]
pub struct Registry {
    map: HashMap<OpKey, Arc<dyn Converter>>,
}

impl Registry {
    /// An empty registry.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::Registry;
    ///
    /// assert!(Registry::empty().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The built-in converters for every built-in op family.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{OpKey, Registry};
    /// use pfor::ops::UnaryKind;
    ///
    /// let r = Registry::builtin();
    /// assert!(r.contains(&OpKey::Builtin(OpKind::Unary(UnaryKind::Exp))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn builtin() -> Registry {
        let mut r = Registry::empty();
        crate::converters::register_all(&mut r);
        r
    }

    /// Register (or replace) a converter.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{ConvertCtx, Converted, OpKey, Registry};
    /// use pfor::ops::UnaryKind;
    ///
    /// let mut r = Registry::builtin();
    /// let n = r.len();
    /// // replace exp's converter (here: by one that declines, so pfor falls back to a loop)
    /// r.register(OpKey::Builtin(OpKind::Unary(UnaryKind::Exp)), |_: &mut ConvertCtx<'_>| Ok(Converted::Unhandled("mine".into())));
    /// assert_eq!(r.len(), n);
    /// let opts = PforOptions::default().with_registry(r);
    /// # let _ = opts;
    /// # Ok(())
    /// # }
    /// ```
    pub fn register(&mut self, key: OpKey, c: impl Converter + 'static) {
        self.map.insert(key, Arc::new(c));
    }

    /// Register a converter; error if one exists for the key.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{ConvertCtx, Converted, OpKey, Registry};
    /// use pfor::ops::UnaryKind;
    ///
    /// let mut r = Registry::builtin();
    /// let key = OpKey::Builtin(OpKind::Unary(UnaryKind::Exp));
    /// let mine = |_: &mut ConvertCtx<'_>| Ok(Converted::Unhandled("mine".into()));
    /// assert!(r.try_register(key, mine).is_err()); // exp has one already
    /// r.try_register(OpKey::Custom("my_op".into()), mine)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_register(&mut self, key: OpKey, c: impl Converter + 'static) -> Result<()> {
        if self.map.contains_key(&key) {
            return Err(Error::InvalidArgument(format!("a converter for {key} is already registered")));
        }
        self.map.insert(key, Arc::new(c));
        Ok(())
    }

    /// The converter for a key.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{OpKey, Registry};
    ///
    /// assert!(Registry::builtin().get(&OpKey::Custom("my_op".into())).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&self, key: &OpKey) -> Option<Arc<dyn Converter>> {
        self.map.get(key).cloned()
    }

    /// True if a converter is registered.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::{OpKey, Registry};
    /// use pfor::ops::UnaryKind;
    ///
    /// assert!(!Registry::empty().contains(&OpKey::Builtin(OpKind::Unary(UnaryKind::Exp))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains(&self, key: &OpKey) -> bool {
        self.map.contains_key(key)
    }

    /// Number of converters.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::Registry;
    ///
    /// assert!(Registry::builtin().len() > 100); // one per op kind
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if empty.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::vectorize::Registry;
    ///
    /// assert!(!Registry::builtin().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
