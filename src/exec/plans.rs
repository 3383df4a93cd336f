//! Plans of function bodies (`cond` branches, loop bodies, library functions), compiled on
//! first use with the options of the run that needs them.
//!
//! Invariants:
//! - a plan is keyed by [`Function::id`], which no other function ever has (a copy gets a
//!   fresh one), so a cached plan is always the plan of the function asked for;
//! - a session's cache ([`FunctionPlans`]) compiles with the session's options (fusion,
//!   the constant pre-transpose), so function bodies run with the options of the session
//!   that runs them; it lives as long as the session;
//! - runs outside a session ([`run_function`](super::run_function)) share one process-wide
//!   cache keyed by the function and the options that shape a plan; it is emptied when it
//!   reaches [`SHARED_MAX`] plans (entries of dropped functions are never hit again).

use std::sync::{Arc, LazyLock, Mutex};

use hashbrown::HashMap;

use super::{ExecOptions, Plan};
use crate::error::Result;
use crate::ir::Function;

/// Most plans the process-wide cache holds before it is emptied.
pub const SHARED_MAX: usize = 4096;

/// The plans a session compiled for function bodies, by [`Function::id`].
#[derive(Debug, Default)]
pub(crate) struct FunctionPlans {
    plans: HashMap<u64, Arc<Plan>>,
}

fn compile(f: &Function, options: &ExecOptions) -> Result<Arc<Plan>> {
    Ok(Arc::new(Plan::compile_options(&f.graph, &f.results, true, options)?))
}

impl FunctionPlans {
    /// The plan of `f` compiled with `options` (the session's: the same on every call).
    pub(crate) fn get(&mut self, f: &Function, options: &ExecOptions) -> Result<Arc<Plan>> {
        if let Some(p) = self.plans.get(&f.id()) {
            return Ok(p.clone());
        }
        let p = compile(f, options)?;
        self.plans.insert(f.id(), p.clone());
        Ok(p)
    }
}

/// The process-wide cache: (function id, fuse, pretranspose) → plan.
type SharedKey = (u64, bool, bool);
static SHARED: LazyLock<Mutex<HashMap<SharedKey, Arc<Plan>>>> = LazyLock::new(Default::default);

/// The plan of `f` compiled with `options`, from the process-wide cache (runs outside a
/// session). The lock is held only to look up or insert, never while compiling or running.
pub(crate) fn shared(f: &Function, options: &ExecOptions) -> Result<Arc<Plan>> {
    let key = (f.id(), options.fuse, options.pretranspose);
    if let Some(p) = SHARED.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(p);
    }
    let p = compile(f, options)?;
    if let Ok(mut m) = SHARED.lock() {
        if m.len() >= SHARED_MAX {
            m.clear();
        }
        m.insert(key, p.clone());
    }
    Ok(p)
}
