//! Elementwise fusion: a connected group of f32 unary, binary and `bias_add` steps whose
//! results all have one shape `D` runs as one step that walks `D` in pieces of at most
//! [`PIECE`] elements; for each piece every member is evaluated into its own scratch buffer
//! (L1/L2 resident) and only the group's results are written to memory. An LSTM cell's
//! nine gate and state ops make one pass over their operands instead of nine.
//!
//! Invariants (besides those of [`super`]):
//! - members are eligible steps (`Op::Unary` of a float kind, `Op::Binary` with
//!   [`binary::f32_fusable`], `Op::Nn(BiasAdd)`) with one output whose static dtype is f32
//!   and whose static shapes agree (equal rank, equal fixed dims); members are kept in plan
//!   order, so a member's internal operands are computed before it;
//! - a group is grown only while every reader of its members that runs before the new
//!   member is itself in the group (so the fused step at the last member's position is
//!   valid: its outside readers all run after it);
//! - at run time the fused path is taken only when every operand is f32 and every member's
//!   concrete result shape (numpy broadcasting of its operands) is the same `D`; anything
//!   else runs the members op by op ([`EwGroup::eval_unfused`]) so errors are unchanged;
//! - per element the fused path computes exactly what the unfused kernels compute
//!   ([`unary::f32_in_place`], [`binary::f32_apply`]; `bias_add` is `x + b`), so results are
//!   bit-identical;
//! - the result buffers are written piece by piece; the pieces of all tasks partition
//!   `[0, |D|)`, so every element is written exactly once before the buffers are exposed.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use hashbrown::{HashMap, HashSet};
use ndarray::{ArrayView2, ArrayViewD, Axis, Ix2, IxDyn};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::exec::{ExecCtx, Step};
use crate::ir::NodeId;
use crate::ops::binary::{self, F32Arg};
use crate::ops::broadcast_shapes;
use crate::ops::{BinaryKind, NnOp, Op, SlicingOp, UnaryKind, unary};
use crate::passes::cost;
use crate::tensor::{DType, Dim, Shape, Tensor};

/// Elements per piece (per member scratch buffer: 4 KiB of f32).
const PIECE: usize = 1024;
/// Work (elements × member cost, see [`Kind::cost`]) above which the walk is split into
/// tasks on the rayon pool: from a pool thread (a run handed to a worker, `exec::workers`)
/// the split costs a few microseconds, from any other thread a cross-thread round trip of
/// tens of microseconds, so cheap groups stay on the calling thread.
fn par_work() -> usize {
    if rayon::current_thread_index().is_some() { 1 << 17 } else { 1 << 19 }
}
/// Tasks per rayon thread when parallel (some slack for uneven progress).
const TASKS_PER_THREAD: usize = 2;
/// Most members in one group (bounds the scratch per task).
const MAX_MEMBERS: usize = 48;
/// Rows shorter than this are walked as one flat row (operands made contiguous first).
const MIN_ROW: usize = 64;

/// What a member computes.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Unary(UnaryKind),
    Binary(BinaryKind),
    /// `x + b` with `b` one row of `D`'s last dim.
    BiasAdd,
}

impl Kind {
    /// Relative work per element, from the one cost estimate ([`cost`]): transcendental
    /// kernels ~8× an add or multiply.
    fn cost(self) -> usize {
        let flops = match self {
            Kind::Unary(k) => cost::unary_flops(k),
            Kind::Binary(k) => cost::binary_flops(k),
            Kind::BiasAdd => 1,
        };
        flops as usize
    }
}

/// A piece of the walk: `(row, rows, len, first column, columns)`.
type Piece = (usize, usize, usize, usize, usize);

/// A member's operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    /// The fused step's input `i`.
    Ext(usize),
    /// The result of member `j` (earlier in the group).
    Int(usize),
}

#[derive(Clone, Debug)]
struct Member {
    node: NodeId,
    op: Op,
    kind: Kind,
    args: Vec<Arg>,
}

/// A result of the group.
#[derive(Clone, Debug)]
enum Sink {
    /// Member `j`'s result, of shape `D`.
    Member(usize),
    /// A `concat` along the last axis of these members' results (each read only by it),
    /// written in place: shape `D` with the last dim times their count.
    Concat(Vec<usize>),
}

/// A fused elementwise group (the plan step's inputs are the group's outside operands, its
/// outputs the `sinks`).
#[derive(Clone, Debug)]
pub(crate) struct EwGroup {
    members: Vec<Member>,
    n_inputs: usize,
    /// The results leaving the group, in the step's output order.
    sinks: Vec<Sink>,
    /// The absorbed `concat` step (node, op), for the unfused path.
    concat: Option<(NodeId, Op)>,
}

fn kind_of(st: &Step) -> Option<Kind> {
    if st.outputs.len() != 1 || st.out_types[0].dtype != DType::F32 || st.fused.is_some() {
        return None;
    }
    match &st.op {
        Op::Unary(k) if st.inputs.len() == 1 && unary::f32_to_f32(*k) => Some(Kind::Unary(*k)),
        Op::Binary(k) if st.inputs.len() == 2 && binary::f32_fusable(*k) => Some(Kind::Binary(*k)),
        Op::Nn(NnOp::BiasAdd) if st.inputs.len() == 2 && st.out_types[0].shape.rank() >= 1 => Some(Kind::BiasAdd),
        _ => None,
    }
}

/// Whether elementwise fusion can take `st` into a group.
pub(crate) fn fusable(st: &Step) -> bool {
    kind_of(st).is_some()
}

/// Same rank and equal fixed dims (a dynamic dim agrees with anything; checked at run time).
fn compatible(a: &Shape, b: &Shape) -> bool {
    a.rank() == b.rank()
        && a.dims().iter().zip(b.dims()).all(|(x, y)| match (x, y) {
            (Dim::Fixed(x), Dim::Fixed(y)) => x == y,
            _ => true,
        })
}

/// Fuse every eligible elementwise group of two or more steps in `steps` (after conv
/// chains, before slot releases are computed); `pinned` are the fetched slots.
pub(crate) fn elementwise_groups(steps: &mut Vec<Step>, pinned: &HashSet<usize>) {
    let (readers, producer) = super::slot_maps(steps);
    let kinds: Vec<Option<Kind>> = steps.iter().map(kind_of).collect();
    let mut group_of: Vec<Option<usize>> = vec![None; steps.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for s in 0..steps.len() {
        if kinds[s].is_none() {
            continue;
        }
        let mut cands: Vec<usize> =
            steps[s].inputs.iter().filter_map(|(slot, _)| producer.get(slot).and_then(|&p| group_of[p])).collect();
        cands.sort_unstable();
        cands.dedup();
        // every reader of a member that runs before `s` must be inside the joined groups
        let joinable = |gs: &[usize]| {
            let size: usize = gs.iter().map(|&g| groups[g].len()).sum();
            size < MAX_MEMBERS
                && gs.iter().all(|&g| compatible(&steps[groups[g][0]].out_types[0].shape, &steps[s].out_types[0].shape))
                && readers_settled(steps, &groups, &group_of, &readers, gs, s)
        };
        let join: Vec<usize> = if !cands.is_empty() && joinable(&cands) {
            cands
        } else {
            // the most recent single group that can take it
            cands.iter().rev().copied().find(|&g| joinable(&[g])).into_iter().collect()
        };
        if join.is_empty() {
            group_of[s] = Some(groups.len());
            groups.push(vec![s]);
            continue;
        }
        let into = merge(&mut groups, &mut group_of, &join);
        groups[into].push(s);
        groups[into].sort_unstable();
        group_of[s] = Some(into);
    }

    merge_concat_groups(steps, &mut groups, &mut group_of, &readers, &producer, pinned);

    let mut removed = vec![false; steps.len()];
    for members in groups.iter().filter(|g| g.len() >= 2) {
        let last = *members.last().expect("groups are non-empty");
        let index: HashMap<usize, usize> = members.iter().enumerate().map(|(j, &m)| (m, j)).collect();
        let mut ext: Vec<usize> = Vec::new();
        let mut fused_members = Vec::with_capacity(members.len());
        for &m in members {
            let st = &steps[m];
            let args = st
                .inputs
                .iter()
                .map(|&(slot, _)| match producer.get(&slot).and_then(|p| index.get(p)) {
                    Some(&j) => Arg::Int(j),
                    None => Arg::Ext(ext.iter().position(|&e| e == slot).unwrap_or_else(|| {
                        ext.push(slot);
                        ext.len() - 1
                    })),
                })
                .collect();
            let kind = kinds[m].expect("members are eligible");
            fused_members.push(Member { node: st.node, op: st.op.clone(), kind, args });
        }
        let concat = concat_sink(steps, members, &readers, &producer, pinned);
        let mut sinks = Vec::new();
        let (mut out_slots, mut out_types) = (Vec::new(), Vec::new());
        for (j, &m) in members.iter().enumerate() {
            let slot = steps[m].outputs[0];
            let read_outside = readers.get(&slot).into_iter().flatten().any(|r| !index.contains_key(r));
            let into_concat = concat.is_some_and(|c| readers.get(&slot).is_some_and(|rs| rs == &[c]));
            if (read_outside && !into_concat) || pinned.contains(&slot) {
                sinks.push(Sink::Member(j));
                out_slots.push(slot);
                out_types.push(steps[m].out_types[0].clone());
            }
        }
        let mut concat_op = None;
        if let Some(c) = concat {
            let js = steps[c].inputs.iter().map(|(slot, _)| index[&producer[slot]]).collect();
            sinks.push(Sink::Concat(js));
            out_slots.push(steps[c].outputs[0]);
            out_types.push(steps[c].out_types[0].clone());
            concat_op = Some((steps[c].node, steps[c].op.clone()));
            removed[c] = true;
        }
        let group = EwGroup { members: fused_members, n_inputs: ext.len(), sinks, concat: concat_op };
        let st = &mut steps[last];
        st.inputs = ext.into_iter().map(|s| (s, false)).collect();
        st.outputs = out_slots;
        st.out_types = out_types;
        st.fused = Some(Box::new(super::Fused::Elementwise(group)));
        for &m in &members[..members.len() - 1] {
            removed[m] = true;
        }
    }
    super::remove_steps(steps, &removed);
}

/// Whether every reader of a member of the groups `gs` runs at or after step `from` or is
/// itself in `gs` (so a fused step placed before `from` precedes all its outside readers).
fn readers_settled(
    steps: &[Step],
    groups: &[Vec<usize>],
    group_of: &[Option<usize>],
    readers: &HashMap<usize, Vec<usize>>,
    gs: &[usize],
    from: usize,
) -> bool {
    gs.iter().flat_map(|&g| &groups[g]).all(|&m| {
        steps[m].outputs.iter().all(|slot| {
            readers
                .get(slot)
                .into_iter()
                .flatten()
                .all(|&r| r >= from || group_of[r].is_some_and(|rg| gs.contains(&rg)))
        })
    })
}

/// Move the members of groups `gs[1..]` into `gs[0]` (kept sorted); returns `gs[0]`.
fn merge(groups: &mut [Vec<usize>], group_of: &mut [Option<usize>], gs: &[usize]) -> usize {
    let into = gs[0];
    for &g in &gs[1..] {
        let moved = std::mem::take(&mut groups[g]);
        for &m in &moved {
            group_of[m] = Some(into);
        }
        groups[into].extend(moved);
    }
    groups[into].sort_unstable();
    into
}

/// Merge the groups whose results are the operands of one `concat` along the last axis
/// (independent chains such as the four gate cotangents of an LSTM step meet only there),
/// when the merged group is valid: every outside reader of a member runs after its last
/// member.
fn merge_concat_groups(
    steps: &[Step],
    groups: &mut [Vec<usize>],
    group_of: &mut [Option<usize>],
    readers: &HashMap<usize, Vec<usize>>,
    producer: &HashMap<usize, usize>,
    pinned: &HashSet<usize>,
) {
    for st in steps {
        let Op::Slicing(SlicingOp::Concat { .. }) = &st.op else { continue };
        let mut gs: Vec<usize> = Vec::new();
        for (slot, _) in &st.inputs {
            match producer.get(slot).and_then(|&p| group_of[p]) {
                Some(g) if !pinned.contains(slot) => gs.push(g),
                _ => {
                    gs.clear();
                    break;
                }
            }
        }
        gs.sort_unstable();
        gs.dedup();
        if gs.len() < 2 || gs.iter().map(|&g| groups[g].len()).sum::<usize>() > MAX_MEMBERS {
            continue;
        }
        let m0 = groups[gs[0]][0];
        let same_shape =
            gs.iter().all(|&g| compatible(&steps[groups[g][0]].out_types[0].shape, &steps[m0].out_types[0].shape));
        let last = gs.iter().filter_map(|&g| groups[g].last().copied()).max().unwrap_or(0);
        if same_shape && readers_settled(steps, groups, group_of, readers, &gs, last + 1) {
            merge(groups, group_of, &gs);
        }
    }
}

/// A `concat` step along the last axis that reads only results of `members` (distinct,
/// each read by nothing else, none fetched) and runs after all of them: the group can write
/// its operands straight into its result.
fn concat_sink(
    steps: &[Step],
    members: &[usize],
    readers: &HashMap<usize, Vec<usize>>,
    producer: &HashMap<usize, usize>,
    pinned: &HashSet<usize>,
) -> Option<usize> {
    let last = *members.last()?;
    let only_reader = |slot: usize| match readers.get(&slot).map(Vec::as_slice) {
        Some(&[c]) if !pinned.contains(&slot) => Some(c),
        _ => None,
    };
    members.iter().find_map(|&m| {
        let c = only_reader(steps[m].outputs[0])?;
        let st = &steps[c];
        let Op::Slicing(SlicingOp::Concat { axis }) = &st.op else { return None };
        let rank = st.out_types[0].shape.rank() as i64;
        let last_axis = *axis == rank - 1 || *axis == -1;
        let mut seen = HashSet::new();
        let operands_ok = st.inputs.iter().all(|&(slot, _)| {
            seen.insert(slot)
                && only_reader(slot) == Some(c)
                && producer.get(&slot).is_some_and(|p| members.binary_search(p).is_ok())
        });
        (c > last && rank >= 1 && last_axis && st.fused.is_none() && st.outputs.len() == 1 && operands_ok).then_some(c)
    })
}

/// An operand of the fused walk over `D` seen as `[rows, len]`.
enum Src<'a> {
    /// Row-major, contiguous: row `r` is `[r·len, (r+1)·len)`.
    Flat(Cow<'a, [f32]>),
    /// Rows at a stride, each contiguous (e.g. one gate of a `split`).
    Strided(ArrayView2<'a, f32>),
    /// One row repeated for every row (e.g. a bias).
    Row(Cow<'a, [f32]>),
    /// One value everywhere.
    Scalar(f32),
}

impl Src<'_> {
    /// Rows `r..r+k` whole (`k > 1`: then `c0 = 0`, `n = len`) or columns `c0..c0+n` of
    /// row `r` (`k = 1`), copied into `buf` when they are not contiguous in the source.
    fn prepare(&self, r: usize, k: usize, len: usize, buf: &mut Vec<f32>) {
        if k == 1 {
            return;
        }
        match self {
            Src::Strided(v) => {
                buf.clear();
                for i in r..r + k {
                    buf.extend_from_slice(v.row(i).to_slice().expect("strided rows are contiguous by construction"));
                }
            }
            // row-periodic: tiled once per task, a prefix serves every piece
            Src::Row(s) if buf.len() < k * len => {
                buf.clear();
                for _ in 0..k {
                    buf.extend_from_slice(s);
                }
            }
            _ => {}
        }
    }

    /// The operand for the piece [`Src::prepare`] was called for.
    #[inline]
    fn piece<'b>(&'b self, r: usize, k: usize, len: usize, c0: usize, n: usize, buf: &'b [f32]) -> F32Arg<'b> {
        match self {
            Src::Flat(s) => F32Arg::Slice(&s[r * len + c0..r * len + c0 + k * n]),
            Src::Strided(_) | Src::Row(_) if k > 1 => F32Arg::Slice(&buf[..k * n]),
            Src::Strided(v) => {
                F32Arg::Slice(&v.row(r).to_slice().expect("strided rows are contiguous by construction")[c0..c0 + n])
            }
            Src::Row(s) => F32Arg::Slice(&s[c0..c0 + n]),
            Src::Scalar(v) => F32Arg::Scalar(*v),
        }
    }
}

/// Whether operands of shapes `a` and `b` broadcast (numpy rules) to exactly `d`.
fn broadcasts_to(a: &[usize], b: &[usize], d: &[usize]) -> bool {
    let dim = |s: &[usize], i: usize| if i < s.len() { s[s.len() - 1 - i] } else { 1 };
    a.len().max(b.len()) == d.len()
        && (0..d.len()).all(|i| {
            let (x, y, want) = (dim(a, i), dim(b, i), d[d.len() - 1 - i]);
            (x == want || x == 1) && (y == want || y == 1) && (x == want || y == want)
        })
}

/// `v` (of shape `d`, `len` = last dim of `d`) as `[rows, len]` strided rows, when its
/// leading axes merge into one and its last axis is contiguous.
fn strided_rows<'a>(v: &ArrayViewD<'a, f32>, len: usize) -> Option<ArrayView2<'a, f32>> {
    let r = v.ndim();
    if r == 0 || (len > 1 && v.strides()[r - 1] != 1) {
        return None;
    }
    let mut w = v.clone();
    if r == 1 {
        w = w.insert_axis(Axis(0));
    } else {
        for take in (0..r - 2).rev() {
            if !w.merge_axes(Axis(take), Axis(r - 2)) && w.len_of(Axis(take)) != 1 {
                return None;
            }
        }
        for _ in 0..r - 2 {
            w = w.index_axis_move(Axis(0), 0);
        }
    }
    w.into_dimensionality::<Ix2>().ok()
}

/// The elements of `v` broadcast to `d`, row-major.
fn materialize(v: &ArrayViewD<'_, f32>, d: &[usize]) -> Option<Vec<f32>> {
    let b = v.broadcast(IxDyn(d))?;
    Some(crate::tensor::layout::standard_vec(&b))
}

impl EwGroup {
    /// The group as text, e.g. `sigmoid, sigmoid, mul, add → 2 results` (for the profiler).
    pub(crate) fn describe(&self) -> String {
        let mut names: Vec<String> = self.members.iter().map(|m| m.op.name()).collect();
        if let Some((_, op)) = &self.concat {
            names.push(op.name());
        }
        format!("fused[{}] → {} results", names.join(", "), self.sinks.len())
    }

    /// Run the group; errors are attributed to the node that raised them.
    pub(crate) fn eval(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        if ins.len() != self.n_inputs {
            return Err(Error::Verify(format!(
                "fused elementwise group: {} inputs, expected {}",
                ins.len(),
                self.n_inputs
            )));
        }
        match self.fused(&ins, ctx) {
            Some(outs) => {
                // operands read for the last time serve later kernels (uniquely owned ones)
                for t in ins {
                    ctx.recycle(t);
                }
                Ok(outs)
            }
            None => self.eval_unfused(ins, ctx),
        }
    }

    /// Op by op, exactly as the unfused plan would run them.
    fn eval_unfused(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let mut vals: Vec<Option<Tensor>> = vec![None; self.members.len()];
        for (j, m) in self.members.iter().enumerate() {
            let args = m
                .args
                .iter()
                .map(|a| match *a {
                    Arg::Ext(i) => Ok(ins[i].clone()),
                    Arg::Int(k) => {
                        vals[k].clone().ok_or_else(|| Error::Verify(format!("fused group: member {k} not computed")))
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            let mut out = m.op.eval(args, ctx).map_err(|e| e.at_node(m.node, m.op.to_string()))?;
            if out.len() != 1 {
                return Err(Error::Verify(format!("{}: {} outputs, expected 1", m.node, out.len())));
            }
            vals[j] = out.pop();
        }
        let val = |j: usize| vals[j].clone().ok_or_else(|| Error::Verify(format!("fused group: result {j} missing")));
        self.sinks
            .iter()
            .map(|s| match s {
                Sink::Member(j) => val(*j),
                Sink::Concat(js) => {
                    let (node, op) =
                        self.concat.as_ref().ok_or_else(|| Error::Verify("fused group: no concat".into()))?;
                    let parts = js.iter().map(|&j| val(j)).collect::<Result<Vec<_>>>()?;
                    let mut out = op.eval(parts, ctx).map_err(|e| e.at_node(*node, op.to_string()))?;
                    out.pop().ok_or_else(|| Error::Verify(format!("{node}: concat returned nothing")))
                }
            })
            .collect()
    }

    /// The fused walk, or `None` when some operand or shape needs the unfused path.
    fn fused(&self, ins: &[Tensor], ctx: &mut ExecCtx<'_>) -> Option<Vec<Tensor>> {
        let views: Vec<ArrayViewD<'_, f32>> = ins
            .iter()
            .map(|t| match t {
                Tensor::F32(a) => Some(a.view()),
                _ => None,
            })
            .collect::<Option<_>>()?;
        // concrete shapes: every member must produce the same D, the first member's result
        // (its operands all come from outside the group); so a member's operands from
        // inside the group have shape D
        let first = self.members.first()?;
        let ext = |a: Arg| match a {
            Arg::Ext(i) => Some(views[i].shape()),
            Arg::Int(_) => None,
        };
        let d = match first.kind {
            Kind::Binary(_) => broadcast_shapes("fused", ext(first.args[0])?, ext(first.args[1])?).ok()?,
            _ => ext(first.args[0])?.to_vec(),
        };
        for m in &self.members {
            let shape = |a: Arg| ext(a).unwrap_or(&d);
            let ok = match m.kind {
                Kind::Unary(_) => shape(m.args[0]) == d.as_slice(),
                Kind::Binary(_) => broadcasts_to(shape(m.args[0]), shape(m.args[1]), &d),
                Kind::BiasAdd => {
                    shape(m.args[0]) == d.as_slice() && d.last().is_some() && shape(m.args[1]) == &d[d.len() - 1..]
                }
            };
            if !ok {
                return None;
            }
        }
        let total: usize = d.iter().product();
        if total == 0 {
            return None;
        }
        // operands as rows of D's last dim
        let mut len = d.last().copied().unwrap_or(1);
        let mut rows = total / len;
        let mut srcs: Vec<Src<'_>> = Vec::with_capacity(views.len());
        for v in &views {
            let src = if v.len() == 1 {
                Src::Scalar(*v.iter().next()?)
            } else if v.shape() == d.as_slice() {
                match v.as_slice() {
                    Some(s) => Src::Flat(Cow::Borrowed(s)),
                    None => match strided_rows(v, len) {
                        Some(w) => Src::Strided(w),
                        None => Src::Flat(Cow::Owned(crate::tensor::layout::standard_vec(v))),
                    },
                }
            } else if v.len() == len && v.shape().last() == Some(&len) {
                match v.as_slice() {
                    Some(s) => Src::Row(Cow::Borrowed(s)),
                    None => Src::Row(Cow::Owned(crate::tensor::layout::standard_vec(v))),
                }
            } else {
                Src::Flat(Cow::Owned(materialize(v, &d)?))
            };
            srcs.push(src);
        }
        // short or all-contiguous rows: walk D as one flat row (not with a concat result,
        // whose rows interleave the members')
        let has_concat = self.sinks.iter().any(|s| matches!(s, Sink::Concat(_)));
        let all_flat = srcs.iter().all(|s| matches!(s, Src::Flat(_) | Src::Scalar(_)));
        if rows > 1 && !has_concat && (len < MIN_ROW || all_flat) {
            for (s, v) in srcs.iter_mut().zip(&views) {
                if matches!(s, Src::Strided(_) | Src::Row(_)) {
                    *s = Src::Flat(Cow::Owned(materialize(v, &d)?));
                }
            }
            (rows, len) = (1, total);
        }
        if has_concat && d.is_empty() {
            return None;
        }
        Some(self.walk(&srcs, &d, rows, len, ctx))
    }

    /// Evaluate every piece of `[rows, len]` and return the group's results (`d`-shaped, or
    /// concatenations of `d`-shaped results along the last axis).
    fn walk(&self, srcs: &[Src<'_>], d: &[usize], rows: usize, len: usize, ctx: &mut ExecCtx<'_>) -> Vec<Tensor> {
        let total = rows * len;
        // elements per row of each result
        let widths: Vec<usize> = self
            .sinks
            .iter()
            .map(|s| match s {
                Sink::Member(_) => len,
                Sink::Concat(js) => len * js.len(),
            })
            .collect();
        let has_concat = widths.iter().any(|&w| w != len);
        // result buffers: recycled by the run where one fits (every element is written below)
        let mut bufs: Vec<Vec<f32>> = widths
            .iter()
            .map(|w| match ctx.recycled::<f32>(rows * w) {
                Some(mut b) => {
                    b.clear();
                    b
                }
                None => Vec::with_capacity(rows * w),
            })
            .collect();
        // tasks: whole rows when there are several, column ranges of the one row otherwise
        // (a concat result's row is not one contiguous range per task: one task then)
        let work = total.saturating_mul(self.members.iter().map(|m| m.kind.cost()).sum());
        let threads = rayon::current_num_threads();
        let parallel = work >= par_work() && threads > 1 && (rows > 1 || !has_concat);
        let n_tasks = if parallel { threads * TASKS_PER_THREAD } else { 1 };
        let (task_rows, task_cols) =
            if rows > 1 { (rows.div_ceil(n_tasks).max(1), len) } else { (1, len.div_ceil(n_tasks).max(1)) };
        // (first row, end row, first column, end column) and each result's chunk
        type Task<'b> = ((usize, usize, usize, usize), Vec<&'b mut [MaybeUninit<f32>]>);
        let mut tasks: Vec<Task<'_>> = Vec::new();
        {
            let mut chunks: Vec<_> = bufs
                .iter_mut()
                .zip(&widths)
                .map(|(b, &w)| b.spare_capacity_mut()[..rows * w].chunks_mut(task_rows * task_cols * w / len))
                .collect();
            let (mut r, mut c) = (0, 0);
            while r < rows {
                let parts: Vec<&mut [MaybeUninit<f32>]> =
                    chunks.iter_mut().map(|ch| ch.next().expect("one chunk per task and result")).collect();
                if rows > 1 {
                    let r1 = (r + task_rows).min(rows);
                    tasks.push(((r, r1, 0, len), parts));
                    r = r1;
                } else {
                    let c1 = (c + task_cols).min(len);
                    tasks.push(((0, 1, c, c1), parts));
                    c = c1;
                    if c == len {
                        r = 1;
                    }
                }
            }
        }
        // a piece: `k` whole rows (short rows), or a run of columns of one row
        let k_rows = if rows > 1 { (PIECE / len).max(1) } else { 1 };
        let piece_len = if k_rows > 1 { k_rows * len } else { PIECE.min(len) };
        let run = |((r0, r1, c_start, c_end), mut outs): Task<'_>| {
            // member j's piece is scratch[j * piece_len..][..piece_len]
            let mut scratch: Vec<f32> = vec![0.0; piece_len * self.members.len()];
            let mut ext_bufs: Vec<Vec<f32>> = srcs.iter().map(|_| Vec::new()).collect();
            let mut r = r0;
            while r < r1 {
                let k = k_rows.min(r1 - r);
                let mut c0 = c_start;
                while c0 < c_end {
                    let n = if k > 1 { len } else { PIECE.min(c_end - c0) };
                    for (src, buf) in srcs.iter().zip(ext_bufs.iter_mut()) {
                        src.prepare(r, k, len, buf);
                    }
                    self.piece(srcs, &ext_bufs, &mut scratch, piece_len, (r, k, len, c0, n));
                    for ((o, sink), &w) in outs.iter_mut().zip(&self.sinks).zip(&widths) {
                        // offset of (row r, column c0) in this task's chunk
                        let at = (r - r0) * w + c0 - c_start;
                        match sink {
                            Sink::Member(j) => {
                                o[at..at + k * n].write_copy_of_slice(&scratch[j * piece_len..][..k * n]);
                            }
                            Sink::Concat(js) => {
                                for i in 0..k {
                                    for (q, &j) in js.iter().enumerate() {
                                        let dst = at + i * w + q * len;
                                        o[dst..dst + n].write_copy_of_slice(&scratch[j * piece_len + i * n..][..n]);
                                    }
                                }
                            }
                        }
                    }
                    c0 += n;
                }
                r += k;
            }
        };
        if tasks.len() > 1 {
            tasks.into_par_iter().for_each(run);
        } else {
            tasks.into_iter().for_each(run);
        }
        let rank = d.len();
        bufs.into_iter()
            .zip(&widths)
            .map(|(mut b, &w)| {
                // SAFETY: the tasks' chunks partition the first `rows·w` spare elements, and
                // each task wrote every element of its chunks: all its rows, and in each row
                // its columns c_start..c_end of every member (a concat row: every member's
                // block), so all `rows·w` elements are initialized.
                unsafe { b.set_len(rows * w) };
                let mut shape = d.to_vec();
                if w != len {
                    shape[rank - 1] = d[rank - 1] * (w / len);
                }
                Tensor::from_vec(&shape, b).expect("the buffer holds one element per index of its shape")
            })
            .collect()
    }

    /// Evaluate every member on one piece (`(r, k, len, c0, n)`: see [`Src::prepare`])
    /// into its piece of `scratch` (`piece_len` elements each).
    fn piece(&self, srcs: &[Src<'_>], ext_bufs: &[Vec<f32>], scratch: &mut [f32], piece_len: usize, at: Piece) {
        let (r, k, len, c0, n) = at;
        let m_len = k * n;
        for (j, m) in self.members.iter().enumerate() {
            let (done, rest) = scratch.split_at_mut(j * piece_len);
            let dst = &mut rest[..m_len];
            let arg = |a: Arg| match a {
                Arg::Ext(i) => srcs[i].piece(r, k, len, c0, n, &ext_bufs[i]),
                Arg::Int(i) => F32Arg::Slice(&done[i * piece_len..][..m_len]),
            };
            match m.kind {
                Kind::Unary(u) => {
                    match arg(m.args[0]) {
                        F32Arg::Slice(s) => dst.copy_from_slice(s),
                        F32Arg::Scalar(v) => dst.fill(v),
                        F32Arg::Dst => {}
                    }
                    unary::f32_in_place(u, dst);
                }
                Kind::Binary(b) => {
                    binary::f32_apply(b, dst, arg(m.args[0]), arg(m.args[1]));
                }
                Kind::BiasAdd => {
                    binary::f32_apply(BinaryKind::Add, dst, arg(m.args[0]), arg(m.args[1]));
                }
            }
        }
    }
}
