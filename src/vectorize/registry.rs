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
    pub fn stacked(y: ValueId) -> Result<Converted> {
        Ok(Converted::Done(vec![Wrapped::stacked(y)]))
    }
    /// One output, stacked or loop-invariant.
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
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The built-in converters for every built-in op family.
    pub fn builtin() -> Registry {
        let mut r = Registry::empty();
        crate::converters::register_all(&mut r);
        r
    }

    /// Register (or replace) a converter.
    pub fn register(&mut self, key: OpKey, c: impl Converter + 'static) {
        self.map.insert(key, Arc::new(c));
    }

    /// Register a converter; error if one exists for the key.
    pub fn try_register(&mut self, key: OpKey, c: impl Converter + 'static) -> Result<()> {
        if self.map.contains_key(&key) {
            return Err(Error::InvalidArgument(format!("a converter for {key} is already registered")));
        }
        self.map.insert(key, Arc::new(c));
        Ok(())
    }

    /// The converter for a key.
    pub fn get(&self, key: &OpKey) -> Option<Arc<dyn Converter>> {
        self.map.get(key).cloned()
    }

    /// True if a converter is registered.
    pub fn contains(&self, key: &OpKey) -> bool {
        self.map.contains_key(key)
    }

    /// Number of converters.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
