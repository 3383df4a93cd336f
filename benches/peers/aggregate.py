"""Medians across runs: python aggregate.py OUT RUN_DIR...  (run.sh calls it when PEERS_RUNS > 1).

For every results_<name>.csv found in the run directories it writes, into OUT:
  results_<name>.csv  per (peer, workload, mode, batch): the median across runs of the
                      per-run median time, throughput recomputed from it (same columns as a
                      single run; a config that failed in every run keeps its FAILED row)
  spread_<name>.csv   peer,workload,mode,batch,n_runs,min_s,median_s,max_s,max_over_min
"""
import csv
import os
import statistics
import sys


def main(out, runs):
    names = sorted({f for d in runs for f in os.listdir(d) if f.startswith("results_") and f.endswith(".csv")})
    for name in names:
        times, work, unit, failed = {}, {}, {}, {}
        for d in runs:
            path = os.path.join(d, name)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for row in csv.DictReader(f):
                    key = (row["peer"], row["workload"], row["mode"], row["batch"])
                    times.setdefault(key, [])
                    if row["unit"].startswith("FAILED"):
                        failed[key] = row["unit"]
                        continue
                    seconds = float(row["median_seconds"])
                    times[key].append(seconds)
                    work[key], unit[key] = float(row["throughput"]) * seconds, row["unit"]
        with open(os.path.join(out, name), "w") as res, open(os.path.join(out, "spread" + name[7:]), "w") as spr:
            res.write("peer,workload,mode,batch,median_seconds,throughput,unit\n")
            spr.write("peer,workload,mode,batch,n_runs,min_s,median_s,max_s,max_over_min\n")
            for key, ts in times.items():
                cols = ",".join(key)
                if not ts:
                    res.write(f"{cols},nan,nan,{failed[key]}\n")
                    continue
                med = statistics.median(ts)
                res.write(f"{cols},{med:.6g},{work[key] / med:.6g},{unit[key]}\n")
                spr.write(f"{cols},{len(ts)},{min(ts):.6g},{med:.6g},{max(ts):.6g},{max(ts) / min(ts):.3f}\n")
        print(f"aggregate.py: {name} from {len(runs)} runs -> {out}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
