"""TensorFlow tf.data peer of W9: a batch-inference pipeline over the Parquet file of pfor's W9.

    python peer_tfdata.py        W9 -> results_tfdata.csv

Source: the `image` column of the W9 file (peerlib.w9_path(): the file bench_report's W9
reads) read by pyarrow in record batches of W9_CHUNK rows inside a generator
(`tf.data.Dataset.from_generator`), unbatched to rows [28,28,1]. Modes (the paper's §5.4
swap), each followed by `prefetch(AUTOTUNE)`:
- `map_batch`: rows -> map(per-example CNN, num_parallel_calls=AUTOTUNE) -> batch(B);
- `batch_vectorized_map`: rows -> batch(B) -> map(tf.vectorized_map(per-example CNN),
  num_parallel_calls=AUTOTUNE).
One call = one pass over the whole file (the rows counted); work = rows (rows/s). The CNN and
its weights are peer_tf's (peerlib.cnn_params()); the images peerlib's mnist(W9_ROWS,
W9_SEED), which is what the file holds: when it is missing or holds other values (bench_report
not run yet), this script writes it with those values. Checks: each mode's first batch against
the batched CNN on the same images; row 0's logits are noted, to compare with the line
bench_report prints under its W9 table.
"""
import os
import time

import numpy as np

import peerlib as pl

_t = time.perf_counter()
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import tensorflow as tf  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _t
from peer_tf import cnn, cnn_vars  # noqa: E402  (TF's CNN and thread pools, shared with W1-W8)

AUTOTUNE = tf.data.AUTOTUNE


def image_column(path):
    """The `image` column of a Parquet file, flattened to float32 values."""
    return pq.read_table(path, columns=["image"]).column("image").combine_chunks().flatten().to_numpy()


def dataset_file(x):
    """The W9 file, written (as bench_report writes it: `id`, `image`) unless it holds x."""
    path = pl.w9_path(x.shape[0])
    if os.path.exists(path):
        try:
            if np.array_equal(image_column(path), x.reshape(-1)):
                return path
        except Exception as e:  # noqa: BLE001 - an unreadable file is written again
            pl.log(f"# {path}: {e}; written again")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    table = pa.table({
        "id": pa.array(np.arange(x.shape[0], dtype=np.int64)),
        "image": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 784),
    })
    tmp = path + ".tmp"  # renamed when complete: a reader never sees half a file
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, path)
    return path


def rows(path):
    """The file's images, one dataset element per row."""
    def batches():
        for b in pq.ParquetFile(path).iter_batches(batch_size=pl.W9_CHUNK, columns=["image"]):
            yield b.column(0).flatten().to_numpy().reshape(-1, 28, 28, 1)
    spec = tf.TensorSpec([None, 28, 28, 1], tf.float32)
    return tf.data.Dataset.from_generator(batches, output_signature=spec).unbatch()


def w9(rec):
    p = cnn_vars()
    one = lambda x: cnn(p, x[None])[0]  # noqa: E731 - the per-example model
    x = pl.mnist(pl.W9_ROWS, pl.W9_SEED)[0]
    path = dataset_file(x)
    want = cnn(p, tf.constant(x[:max(pl.W9_BATCHES)])).numpy()
    rec.note(f"W9 file {os.path.abspath(path)}, {pl.W9_ROWS} rows; row 0's logits: "
             f"[{', '.join(f'{v:.4f}' for v in want[0])}]")
    for b in pl.W9_BATCHES:
        pipelines = {
            "map_batch": rows(path).map(one, num_parallel_calls=AUTOTUNE).batch(b),
            "batch_vectorized_map": rows(path).batch(b).map(
                lambda xb: tf.vectorized_map(one, xb), num_parallel_calls=AUTOTUNE),
        }
        for mode, ds in pipelines.items():
            ds = ds.prefetch(AUTOTUNE)

            def one_pass(ds=ds):
                first, n = None, 0
                for out in ds:
                    if first is None:
                        first = out.numpy()
                    n += int(out.shape[0])
                if n != pl.W9_ROWS:
                    raise RuntimeError(f"{n} rows out of {pl.W9_ROWS}")
                return first

            first = rec.time(pl.W9, mode, b, one_pass, (), pl.W9_ROWS, pl.W9_UNIT)
            if first is not None:
                rec.check("W9", b, f"{mode} first batch vs the batched CNN", [first], [want[:b]])


if __name__ == "__main__":
    rec = pl.Recorder("tfdata")
    rec.imported("tensorflow+pyarrow", IMPORT_SECONDS)
    pl.main(rec.peer, f"tensorflow {tf.__version__}, pyarrow {pa.__version__}", IMPORT_SECONDS, lambda: w9(rec))
