//! Plan-level fusion: groups of steps that run as ONE step, so intermediates stay in cache
//! instead of making full passes over memory.
//!
//! - [`conv`]: `conv2d → [reshape] → bias_add → [reshape] → add(residual) → relu`, the bias,
//!   residual and relu applied to each GEMM output chunk (and a constant filter's Winograd
//!   transform made once, at compile time);
//! - [`concat`]: a last-axis `concat` of conv chains' results (SqueezeNet's fire modules)
//!   has each conv kernel write its channel slice of the concat's output, no copy;
//! - [`bias_split`]: `split(bias_add(z, b))` along the last axis becomes per-piece `bias_add`s
//!   of the split pieces, which the elementwise groups then take in;
//! - [`patch_product`]: `extract_patches → [reshape] → batch_matmul(adj_a)` (per-example
//!   conv filter gradients) reads the window taps from the input, never writing the patches;
//! - [`elementwise`]: connected groups of f32 unary / binary / `bias_add` steps of one shape
//!   (an LSTM cell's gates and state update, a backward pass's `s·(1-s)·g` chains) evaluated
//!   piece by piece, every intermediate living in a small scratch buffer.
//!
//! Every fusion matches its pattern through the passes' toolkit ([`crate::passes::pattern`])
//! on a [`PlanView`] of the plan.
//!
//! Invariants shared by all:
//! - a value is fused away only when every reader is in the group and it is not fetched;
//!   values read outside (or fetched) are still produced, by the fused step;
//! - the fused step takes the position of the group's LAST step in the plan: every input
//!   of the group is computed before it and every outside reader of its results after it;
//!   slot releases are computed after fusion;
//! - results are bit-identical to the unfused plan (the same float operations per element,
//!   in the same order); operands a fused kernel does not take run the group op by op, so
//!   every error is the unfused one, naming the node that raised it.

mod bias_split;
mod concat;
mod conv;
mod elementwise;
mod patch_product;

pub(super) use bias_split::split_biases;
pub(super) use concat::concat_slices;
pub(super) use conv::conv_chains;
pub(super) use elementwise::{elementwise_groups, fusable};
pub(super) use patch_product::patch_products;

use hashbrown::{HashMap, HashSet};

use super::{ExecCtx, Step};
use crate::error::Result;
use crate::ops::Op;
use crate::passes::pattern::Dataflow;
use crate::tensor::{Tensor, TensorType};

/// Who reads and who writes each slot of a plan: `(readers, producer)` by step index
/// (a step reading a slot twice is listed twice).
pub(super) fn slot_maps(steps: &[Step]) -> (HashMap<usize, Vec<usize>>, HashMap<usize, usize>) {
    let mut readers: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut producer: HashMap<usize, usize> = HashMap::new();
    for (si, st) in steps.iter().enumerate() {
        for &(s, _) in &st.inputs {
            readers.entry(s).or_default().push(si);
        }
        for &s in &st.outputs {
            producer.insert(s, si);
        }
    }
    (readers, producer)
}

/// A plan as [`Dataflow`] (the pattern toolkit the graph passes use): steps are nodes,
/// slots are values, fetched slots are pinned; a fused step matches no pattern.
pub(super) struct PlanView<'a> {
    steps: &'a [Step],
    readers: HashMap<usize, Vec<usize>>,
    producer: HashMap<usize, usize>,
    pinned: &'a HashSet<usize>,
}

impl<'a> PlanView<'a> {
    pub(super) fn new(steps: &'a [Step], pinned: &'a HashSet<usize>) -> PlanView<'a> {
        let (readers, producer) = slot_maps(steps);
        PlanView { steps, readers, producer, pinned }
    }
    /// The step producing each slot.
    pub(super) fn producers(&self) -> &HashMap<usize, usize> {
        &self.producer
    }
}

impl Dataflow for PlanView<'_> {
    type Node = usize;
    type Value = usize;
    fn op(&self, n: usize) -> Option<&Op> {
        self.steps.get(n).filter(|st| st.fused.is_none()).map(|st| &st.op)
    }
    fn inputs(&self, n: usize) -> Vec<usize> {
        self.steps.get(n).map(|st| st.inputs.iter().map(|i| i.0).collect()).unwrap_or_default()
    }
    fn outputs(&self, n: usize) -> Vec<usize> {
        self.steps.get(n).map(|st| st.outputs.clone()).unwrap_or_default()
    }
    fn value_type(&self, v: usize) -> Option<&TensorType> {
        let st = &self.steps[*self.producer.get(&v)?];
        st.outputs.iter().position(|&s| s == v).map(|k| &st.out_types[k])
    }
    fn producer(&self, v: usize) -> Option<usize> {
        self.producer.get(&v).copied()
    }
    fn readers(&self, v: usize) -> Vec<usize> {
        self.readers.get(&v).cloned().unwrap_or_default()
    }
    fn pinned(&self, v: usize) -> bool {
        self.pinned.contains(&v)
    }
}

/// Drop the steps marked in `removed` (fused into a later step), keeping the order.
fn remove_steps(steps: &mut Vec<Step>, removed: &[bool]) {
    let mut i = 0;
    steps.retain(|_| {
        i += 1;
        !removed[i - 1]
    });
}

/// A fused group run in place of its last step.
#[derive(Clone, Debug)]
pub(super) enum Fused {
    /// A conv chain (the step's inputs are `[x, filter]` or `[x, filter, bias]`).
    Conv(conv::ConvChain),
    /// A concat of conv chains written into its slices (the step's inputs are the parts').
    Concat(concat::ConcatSlices),
    /// An elementwise group (the step's inputs are the group's outside operands).
    Elementwise(elementwise::EwGroup),
    /// Window patches times `dy` (the step's inputs are `[x, dy]`).
    PatchProduct(patch_product::PatchProduct),
}

impl Fused {
    /// Run the group on the step's inputs; errors are attributed to the node that raised them.
    pub(super) fn eval(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        match self {
            Fused::Conv(c) => c.eval(ins, ctx),
            Fused::Concat(c) => c.eval(ins, ctx),
            Fused::Elementwise(g) => g.eval(ins, ctx),
            Fused::PatchProduct(p) => p.eval(ins, ctx),
        }
    }

    /// `(text, kind)` for the profiler.
    pub(super) fn label(&self) -> (String, String) {
        match self {
            Fused::Conv(c) => (c.describe(), "fused_conv".into()),
            Fused::Concat(c) => (c.describe(), "fused_concat".into()),
            Fused::Elementwise(g) => (g.describe(), "fused_elementwise".into()),
            Fused::PatchProduct(p) => (p.describe(), "fused_patch_product".into()),
        }
    }
}
