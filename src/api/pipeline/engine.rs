//! The pipeline engine: source → parallel decode → batch → vectorized map → sink.
//!
//! ```text
//!  source (iterator)      decode threads (std, N)           calling thread
//!  ─ feeder thread ─▶ jobs ─▶ decode + check + stack ─▶ results ─▶ reorder ─▶ model ─▶ sink
//!        ▲ gate: batches and bytes in flight ◀───────────────────── release after the sink
//! ```
//!
//! - **Threads**: the feeder reads the source and cuts it into batches of `batch_size`
//!   records; `decode_threads` plain std threads (not the rayon pool the kernels use) decode,
//!   check and stack whole batches; the model and the sink run on the calling thread, so the
//!   model of batch `b` overlaps the decoding of the batches after it.
//! - **One session**: the model is vectorized and compiled once with a dynamic batch dim; every
//!   batch size, the last partial batch and batches shrunk by skipped records run on it.
//! - **Order**: batches reach the model and the sink in source order (a reorder buffer), and
//!   record errors are reported in that order, whatever the decode threads' timing.
//! - **Bounded queues and memory**: a batch is admitted (before it is decoded) only while fewer
//!   than `prefetch` batches are in flight and, with `max_bytes_in_flight`, while its decoded
//!   feeds fit in the byte budget; it stays in flight until its sink call returns. Decoded
//!   bytes are known before decoding because the example types must then be fully fixed; a
//!   record that decodes to another shape is a record error. Raw records are bounded by count:
//!   the feeder holds at most one batch while it waits for admission.
//! - **Errors**: a decode error, a panic in the decode closure or an example that does not match
//!   the element types is a *record* error: [`ErrorPolicy::Fail`] stops with
//!   [`Error::AtRecord`] naming the record's index (the first such record in source order);
//!   [`ErrorPolicy::Skip`] drops the record and counts it. A source error, a model error or a
//!   sink error always stops the run (a model error names the batch and its records).
//! - **Cancellation**: the [`CancelToken`] is checked before every batch and interrupts the
//!   model run itself, so a cancelled run stops within one batch: no batch starts after the
//!   token is seen, and the returned stats have `cancelled` set.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Instant;

use super::model::{Assembler, BatchModel};
use crate::api::MapAxes;
use crate::error::{Error, Result};
use crate::exec::{CancelToken, RunOptions};
use crate::ir::{Graph, ValueId};
use crate::tensor::{Tensor, TensorType};
use crate::vectorize::PforOptions;

/// What a record error does to the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// Stop with [`Error::AtRecord`] naming the first failing record (the default).
    #[default]
    Fail,
    /// Drop the record, count it in [`PipelineStats::skipped`] and go on.
    Skip,
}

/// The engine's settings. [`PipelineConfig::new`] gives the defaults; the builder methods
/// change one setting each.
#[derive(Clone)]
pub struct PipelineConfig {
    /// Records per batch (the last batch may be smaller).
    pub batch_size: usize,
    /// Batches in flight at most: admitted for decoding and not yet through the sink (>= 1;
    /// 1 runs the stages one after the other).
    pub prefetch: usize,
    /// Decode threads (>= 1).
    pub decode_threads: usize,
    /// Budget of decoded input bytes in flight (`None`: bounded by `prefetch` only). Needs
    /// fully fixed example types, and a full batch must fit.
    pub max_bytes_in_flight: Option<usize>,
    /// What a record error does.
    pub errors: ErrorPolicy,
    /// Stops the run within one batch when cancelled.
    pub cancel: Option<CancelToken>,
    /// The vectorizer's options.
    pub options: PforOptions,
    /// In- and out-axes of the map (see [`MapAxes`]).
    pub axes: MapAxes,
}

/// One builder method per setting: `name(arg: Type) => value stored`.
macro_rules! setters {
    ($($name:ident($arg:ident: $t:ty) => $value:expr;)*) => {$(
        #[doc = concat!("Set the field `", stringify!($name), "`.")]
        pub fn $name(mut self, $arg: $t) -> PipelineConfig {
            self.$name = $value;
            self
        }
    )*};
}

impl PipelineConfig {
    /// Defaults: 2 decode threads, 4 batches in flight, no byte budget, fail on a record error.
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let config = PipelineConfig::new(32).decode_threads(4); // then adjust with the setters
    /// assert_eq!((config.batch_size, config.decode_threads, config.prefetch), (32, 4, 4));
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(batch_size: usize) -> PipelineConfig {
        PipelineConfig {
            batch_size,
            prefetch: 4,
            decode_threads: 2,
            max_bytes_in_flight: None,
            errors: ErrorPolicy::Fail,
            cancel: None,
            options: PforOptions::default(),
            axes: MapAxes::new(),
        }
    }
    setters! {
        prefetch(batches: usize) => batches;
        decode_threads(n: usize) => n;
        max_bytes_in_flight(bytes: usize) => Some(bytes);
        errors(policy: ErrorPolicy) => policy;
        cancel(token: &CancelToken) => Some(token.clone());
        options(options: PforOptions) => options;
        axes(axes: MapAxes) => axes;
    }
}

/// What a run did. Seconds are wall time per stage; `decode_seconds` adds up the decode
/// threads (it can exceed `wall_seconds`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PipelineStats {
    /// Records taken through the pipeline: `rows + skipped`.
    pub records: usize,
    /// Records whose outputs reached the sink.
    pub rows: usize,
    /// Batches run by the model.
    pub batches: usize,
    /// Records dropped by [`ErrorPolicy::Skip`].
    pub skipped: usize,
    /// Their indices, in source order.
    pub skipped_records: Vec<usize>,
    /// The run stopped on its cancel token.
    pub cancelled: bool,
    /// The most decoded input bytes in flight at once (admitted, not yet through the sink);
    /// 0 when the example types are not fully fixed (not measured then).
    pub peak_bytes_in_flight: usize,
    /// Reading the source (feeder thread).
    pub read_seconds: f64,
    /// Decoding, checking and stacking (all decode threads together).
    pub decode_seconds: f64,
    /// The model.
    pub model_seconds: f64,
    /// The sink.
    pub sink_seconds: f64,
    /// The calling thread waiting for a decoded batch (input not keeping up).
    pub wait_seconds: f64,
    /// The whole run.
    pub wall_seconds: f64,
}

impl PipelineStats {
    /// Rows through the sink per second of wall time.
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let types = [TensorType::new(DType::F32, [2])];
    /// let mut p = Pipeline::new(&types, PipelineConfig::new(8), |g, x| Ok(vec![g.neg(x[0])?]))?;
    /// let stats = p.run((0..20).map(Ok), |k: i32| Ok(vec![Tensor::vec1(&[k as f32, 0.0])]), |_| Ok(()))?;
    /// assert_eq!((stats.rows, stats.batches), (20, 3)); // 8, 8 and 4
    /// assert!(stats.rows_per_second() > 0.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rows_per_second(&self) -> f64 {
        if self.wall_seconds > 0.0 { self.rows as f64 / self.wall_seconds } else { 0.0 }
    }
}

/// One batch's outputs as the sink receives them.
#[derive(Clone, Debug)]
pub struct BatchOutput {
    /// The batch's position (0, 1, ...), in source order.
    pub batch: usize,
    /// The source indices of the records in it (skipped records are absent).
    pub records: Vec<usize>,
    /// One tensor per output of the map, with the batch axis where the out-axes put it.
    pub outputs: Vec<Tensor>,
}

/// The engine: a compiled vectorized map and its settings; [`run`](Self::run) it over any
/// number of sources.
///
/// ```
/// use pfor::api::{Pipeline, PipelineConfig};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let types = [TensorType::new(DType::F32, [3])];
/// let mut p = Pipeline::new(&types, PipelineConfig::new(4), |g, x| Ok(vec![g.sum_all(x[0])?]))?;
/// // records are numbers; decoding turns one into an example (on the decode threads)
/// let decode = |k: u32| Ok(vec![Tensor::from_vec(&[3], vec![k as f32; 3])?]);
/// let mut sums = Vec::new();
/// let stats = p.run((0..10u32).map(Ok), decode, |b| {
///     sums.extend(b.outputs[0].to_vec::<f32>()?);
///     Ok(())
/// })?;
/// assert_eq!(sums, (0..10).map(|k| 3.0 * k as f32).collect::<Vec<_>>());
/// assert_eq!((stats.rows, stats.batches), (10, 3));
/// # Ok(())
/// # }
/// ```
pub struct Pipeline {
    model: BatchModel,
    config: PipelineConfig,
}

impl Pipeline {
    /// Vectorize the per-example function `f` (examples typed by `elem_types`) and compile
    /// it once for every batch size. Errors on a bad setting (a zero size, a byte budget with
    /// dynamic example types or smaller than one full batch) or when `f` does not vectorize.
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let types = [TensorType::new(DType::F32, [3])];
    /// // the per-example function, vectorized and compiled once for every batch size
    /// let p = Pipeline::new(&types, PipelineConfig::new(16), |g, x| Ok(vec![g.reduce_max(x[0], None, false)?]))?;
    /// assert_eq!(p.config().batch_size, 16);
    /// assert!(Pipeline::new(&types, PipelineConfig::new(0), |_, x| Ok(x.to_vec())).is_err()); // a zero batch
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(
        elem_types: &[TensorType],
        config: PipelineConfig,
        f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Pipeline> {
        for (name, v) in [
            ("batch_size", config.batch_size),
            ("prefetch", config.prefetch),
            ("decode_threads", config.decode_threads),
        ] {
            if v == 0 {
                return Err(Error::InvalidArgument(format!("pipeline: {name} must be > 0")));
            }
        }
        let model = BatchModel::new(elem_types, &config.options, f, &config.axes)?;
        if let Some(budget) = config.max_bytes_in_flight {
            let types = elem_types.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            match model.assembler.batch_bytes(config.batch_size) {
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "pipeline: max_bytes_in_flight needs fully fixed example types, got [{types}]"
                    )));
                }
                Some(b) if b > budget => {
                    return Err(Error::InvalidArgument(format!(
                        "pipeline: one batch of {} examples of [{types}] is {b} bytes, more than \
                         max_bytes_in_flight = {budget}",
                        config.batch_size
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(Pipeline { model, config })
    }

    /// The settings.
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let types = [TensorType::new(DType::I64, Shape::scalar())];
    /// let p = Pipeline::new(&types, PipelineConfig::new(4).prefetch(2), |g, x| Ok(vec![g.add(x[0], x[0])?]))?;
    /// assert_eq!(p.config().prefetch, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// Run over `source`: each record is decoded into one example by `decode` (on the decode
    /// threads), examples are batched and mapped, and `sink` receives each batch's outputs in
    /// source order. A source item `Err` stops the run (after the records before it).
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let types = [TensorType::new(DType::I64, Shape::scalar())];
    /// let mut p = Pipeline::new(&types, PipelineConfig::new(4), |g, x| Ok(vec![g.mul(x[0], x[0])?]))?;
    /// let mut squares = Vec::new();
    /// // source -> decode (on the decode threads) -> batches of 4 -> the map -> sink, in order
    /// let stats = p.run((0..10i64).map(Ok), |k| Ok(vec![Tensor::scalar(k)]), |b| {
    ///     squares.extend(b.outputs[0].to_vec::<i64>()?);
    ///     Ok(())
    /// })?;
    /// assert_eq!(squares, (0..10i64).map(|k| k * k).collect::<Vec<_>>());
    /// assert_eq!(stats.batches, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run<R, S, D, K>(&mut self, source: S, decode: D, sink: K) -> Result<PipelineStats>
    where
        R: Send,
        S: IntoIterator<Item = Result<R>>,
        S::IntoIter: Send,
        D: Fn(R) -> Result<Vec<Tensor>> + Sync,
        K: FnMut(BatchOutput) -> Result<()>,
    {
        self.run_with_progress(source, decode, sink, |_| {})
    }

    /// [`run`](Self::run), calling `progress` on the calling thread with the stats so far
    /// after every batch (e.g. to move a progress bar).
    ///
    /// ```
    /// use pfor::api::{Pipeline, PipelineConfig};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let types = [TensorType::new(DType::F64, Shape::scalar())];
    /// let mut p = Pipeline::new(&types, PipelineConfig::new(5), |g, x| Ok(vec![g.exp(x[0])?]))?;
    /// let mut seen = Vec::new(); // e.g. a progress bar's position
    /// let decode = |k: u32| Ok(vec![Tensor::scalar(f64::from(k))]);
    /// p.run_with_progress((0..12u32).map(Ok), decode, |_| Ok(()), |s| seen.push(s.rows))?;
    /// assert_eq!(seen, [5, 10, 12]); // after every batch
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_with_progress<R, S, D, K, P>(
        &mut self,
        source: S,
        decode: D,
        mut sink: K,
        mut progress: P,
    ) -> Result<PipelineStats>
    where
        R: Send,
        S: IntoIterator<Item = Result<R>>,
        S::IntoIter: Send,
        D: Fn(R) -> Result<Vec<Tensor>> + Sync,
        K: FnMut(BatchOutput) -> Result<()>,
        P: FnMut(&PipelineStats),
    {
        let start = Instant::now();
        let cfg = &self.config;
        let BatchModel { session, assembler } = &mut self.model;
        let assembler: &Assembler = assembler;
        let gate = Gate::new(cfg.prefetch, cfg.max_bytes_in_flight);
        let (job_tx, job_rx) = sync_channel::<Job<R>>(cfg.decode_threads);
        let job_rx = Mutex::new(job_rx);
        let (res_tx, res_rx) = channel::<Msg>();
        let source = source.into_iter();
        let mut stats = PipelineStats::default();
        let result = thread::scope(|s| {
            let feeder_tx = res_tx.clone();
            let (gate_ref, batch_size) = (&gate, cfg.batch_size);
            s.spawn(move || feed(source, batch_size, assembler, gate_ref, &job_tx, &feeder_tx));
            for _ in 0..cfg.decode_threads {
                let (tx, rx, decode) = (res_tx.clone(), &job_rx, &decode);
                s.spawn(move || decode_worker(rx, &tx, decode, assembler, gate_ref));
            }
            drop(res_tx);
            let mut consumer = Consumer {
                session,
                res_rx,
                pending: BTreeMap::new(),
                end: None,
                policy: cfg.errors,
                cancel: cfg.cancel.as_ref(),
                gate: &gate,
            };
            let r = consumer.run(&mut stats, &mut sink, &mut progress, start);
            gate.stop();
            r
        });
        let flow = gate.lock();
        (stats.read_seconds, stats.peak_bytes_in_flight) = (flow.read_seconds, flow.peak_bytes);
        drop(flow);
        stats.wall_seconds = start.elapsed().as_secs_f64();
        result.map(|()| stats)
    }
}

/// A batch of raw records on its way to a decode thread.
struct Job<R> {
    no: usize,
    records: Vec<(usize, R)>,
    bytes: usize,
}

/// A decoded batch: the surviving records' feeds and the record errors, in source order.
struct Decoded {
    no: usize,
    records: Vec<usize>,
    feeds: Result<Vec<(ValueId, Tensor)>>,
    errors: Vec<(usize, Error)>,
    bytes: usize,
    seconds: f64,
}

enum Msg {
    Batch(Decoded),
    /// The feeder is done: `batches` were sent; `error` is a source error at a record index.
    End {
        batches: usize,
        error: Option<(usize, Error)>,
    },
}

/// Admission control: batches and bytes in flight.
struct Gate {
    flow: Mutex<Flow>,
    cv: Condvar,
    max_batches: usize,
    max_bytes: Option<usize>,
}

#[derive(Default)]
struct Flow {
    batches: usize,
    bytes: usize,
    peak_bytes: usize,
    read_seconds: f64,
    stop: bool,
}

impl Gate {
    fn new(max_batches: usize, max_bytes: Option<usize>) -> Gate {
        Gate { flow: Mutex::new(Flow::default()), cv: Condvar::new(), max_batches, max_bytes }
    }
    fn lock(&self) -> MutexGuard<'_, Flow> {
        self.flow.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Wait until a batch of `bytes` fits; `false` when the run is stopping.
    fn admit(&self, bytes: usize) -> bool {
        let mut f = self.lock();
        loop {
            if f.stop {
                return false;
            }
            let fits = self.max_bytes.is_none_or(|m| f.bytes + bytes <= m);
            if f.batches < self.max_batches && fits {
                f.batches += 1;
                f.bytes += bytes;
                f.peak_bytes = f.peak_bytes.max(f.bytes);
                return true;
            }
            f = self.cv.wait(f).unwrap_or_else(|e| e.into_inner());
        }
    }
    fn release(&self, bytes: usize) {
        let mut f = self.lock();
        f.batches -= 1;
        f.bytes -= bytes;
        self.cv.notify_all();
    }
    fn stop(&self) {
        self.lock().stop = true;
        self.cv.notify_all();
    }
    fn stopped(&self) -> bool {
        self.lock().stop
    }
}

/// The feeder thread: cut the source into batches, admit each through the gate, hand it to
/// the decode threads; then report the end (and a source error, with its record index).
fn feed<R, I: Iterator<Item = Result<R>>>(
    mut source: I,
    batch_size: usize,
    assembler: &Assembler,
    gate: &Gate,
    jobs: &SyncSender<Job<R>>,
    results: &Sender<Msg>,
) {
    let (mut index, mut no, mut error) = (0usize, 0usize, None);
    loop {
        let t = Instant::now();
        let mut records = Vec::with_capacity(batch_size);
        while records.len() < batch_size {
            match source.next() {
                None => break,
                Some(Ok(r)) => records.push((index, r)),
                Some(Err(e)) => {
                    error = Some((index, e));
                    break;
                }
            }
            index += 1;
        }
        gate.lock().read_seconds += t.elapsed().as_secs_f64();
        let last = records.len() < batch_size || error.is_some();
        if !records.is_empty() {
            let bytes = assembler.batch_bytes(records.len()).unwrap_or(0);
            if !gate.admit(bytes) || jobs.send(Job { no, records, bytes }).is_err() {
                return;
            }
            no += 1;
        }
        if last {
            break;
        }
    }
    // the consumer may be gone (stopped early): nothing to tell then
    let _ = results.send(Msg::End { batches: no, error });
}

/// A decode thread: decode, check and stack whole batches until the jobs run out.
fn decode_worker<R, D>(jobs: &Mutex<Receiver<Job<R>>>, results: &Sender<Msg>, decode: &D, asm: &Assembler, gate: &Gate)
where
    D: Fn(R) -> Result<Vec<Tensor>>,
{
    loop {
        let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = job else { return };
        if gate.stopped() {
            continue; // drain, so that the feeder is never stuck on a full queue
        }
        let t = Instant::now();
        let (mut records, mut examples, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        for (i, r) in job.records {
            let ex = catch_unwind(AssertUnwindSafe(|| decode(r))).unwrap_or_else(|p| {
                let msg =
                    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                Err(Error::InvalidArgument(format!(
                    "pipeline: the decode closure panicked: {}",
                    msg.unwrap_or_default()
                )))
            });
            match ex.and_then(|ex| asm.check(&ex).map(|()| ex)) {
                Ok(ex) => {
                    records.push(i);
                    examples.push(ex);
                }
                Err(e) => errors.push((i, e)),
            }
        }
        // a broadcast component differing from the batch's first example fails that record
        while let Err((j, e)) = asm.check_broadcast(&examples) {
            errors.push((records.remove(j), e));
            examples.remove(j);
        }
        errors.sort_by_key(|(i, _)| *i);
        let feeds = if examples.is_empty() { Ok(Vec::new()) } else { asm.stack(&examples) };
        drop(examples);
        let seconds = t.elapsed().as_secs_f64();
        let msg = Msg::Batch(Decoded { no: job.no, records, feeds, errors, bytes: job.bytes, seconds });
        if results.send(msg).is_err() {
            return;
        }
    }
}

/// The calling thread's stage: reorder, run the model, call the sink.
struct Consumer<'a> {
    session: &'a mut crate::exec::Session,
    res_rx: Receiver<Msg>,
    pending: BTreeMap<usize, Decoded>,
    end: Option<(usize, Option<(usize, Error)>)>,
    policy: ErrorPolicy,
    cancel: Option<&'a CancelToken>,
    gate: &'a Gate,
}

impl Consumer<'_> {
    fn run(
        &mut self,
        stats: &mut PipelineStats,
        sink: &mut impl FnMut(BatchOutput) -> Result<()>,
        progress: &mut impl FnMut(&PipelineStats),
        start: Instant,
    ) -> Result<()> {
        let run_options = self.cancel.map(RunOptions::cancellable).unwrap_or_default();
        let mut next = 0usize;
        loop {
            if self.cancel.is_some_and(CancelToken::is_cancelled) {
                stats.cancelled = true;
                return Ok(());
            }
            if let Some((batches, error)) = &mut self.end
                && next == *batches
            {
                return match error.take() {
                    Some((index, e)) => Err(Error::AtRecord { index, source: Box::new(e) }),
                    None => Ok(()),
                };
            }
            let Some(d) = self.pending.remove(&next) else {
                let t = Instant::now();
                let msg = self.res_rx.recv();
                stats.wait_seconds += t.elapsed().as_secs_f64();
                match msg {
                    Ok(Msg::Batch(d)) => {
                        self.pending.insert(d.no, d);
                    }
                    Ok(Msg::End { batches, error }) => self.end = Some((batches, error)),
                    Err(_) => {
                        return Err(Error::InvalidArgument(format!(
                            "pipeline: the input stage stopped before batch {next} arrived"
                        )));
                    }
                }
                continue;
            };
            stats.decode_seconds += d.seconds;
            if self.policy == ErrorPolicy::Fail
                && let Some((index, e)) = d.errors.first()
            {
                return Err(Error::AtRecord { index: *index, source: Box::new(e.clone()) });
            }
            stats.skipped += d.errors.len();
            stats.skipped_records.extend(d.errors.iter().map(|(i, _)| *i));
            if !d.records.is_empty() {
                let span = || format!("batch {next} (records {}..={})", d.records[0], d.records[d.records.len() - 1]);
                let feeds = d.feeds.map_err(|e| Error::InvalidArgument(format!("pipeline: {}: {e}", span())))?;
                let t = Instant::now();
                let outputs = self.session.run_with(&feeds, &run_options);
                drop(feeds);
                stats.model_seconds += t.elapsed().as_secs_f64();
                let outputs = match outputs {
                    Err(Error::Cancelled { .. }) if self.cancel.is_some_and(CancelToken::is_cancelled) => {
                        stats.cancelled = true;
                        return Ok(());
                    }
                    Err(e) => {
                        return Err(Error::InvalidArgument(format!("pipeline: the model failed on {}: {e}", span())));
                    }
                    Ok(o) => o,
                };
                let rows = d.records.len();
                let t = Instant::now();
                sink(BatchOutput { batch: next, records: d.records, outputs })?;
                stats.sink_seconds += t.elapsed().as_secs_f64();
                stats.batches += 1;
                stats.rows += rows;
            }
            stats.records = stats.rows + stats.skipped;
            stats.peak_bytes_in_flight = self.gate.lock().peak_bytes;
            self.gate.release(d.bytes);
            next += 1;
            stats.wall_seconds = start.elapsed().as_secs_f64();
            progress(stats);
        }
    }
}
