"""Scoring past one process: the audit's engines ``local`` and ``ray`` on the same real reviews, and a load run of
the audit itself on Ray with many rows.

    .venv/bin/python benchmarks/bench_scale.py [--model minilm] [--rows 20000] [--rounds 3] [--threads 2]
        [--load-rows 50000 200000] [--preset dynamic] [--work runs/bench/scale] [--out runs/bench/bench_scale.json]
        [--quick] [--no-load]

1. Throughput. The built-in reviews, repeated until there are ``--rows`` of them (the text stays real), scored
   with the fused FP32 graph and its per-channel dynamic INT8 graph (built as ``benchmarks/bench_stacks.py``
   builds them) by :func:`workbench.runtime.ortinfer.predict_dataset`, the audit's one scoring path: ``local``
   in one session of ``--threads`` threads, ``ray`` on a local Ray instance with a pool of ``--threads``
   one-thread actors (:func:`workbench.runtime.engine.scoring_engine`). Both engines run in the same rounds, their
   order alternating; each call gets a tokenizer loaded again, so no call reuses another's tokenization. Each
   round gives rows per second per engine and graph (the whole call) and Ray's overhead (1 - ray rate / local
   rate). The per-actor throughput the scale page's prediction is made from is the pool's steady rate (from its
   first batch back to its last: the pool's start, paid once per graph, left out) divided by its actors.
2. Load. ``workbench audit --engine ray`` (one INT8 ``--preset``, ``--quick``, speed guard off) in a process of its
   own on the reviews repeated to each of ``--load-rows`` rows, written as Parquet; every 0.5 s the memory of its
   processes is read: the driver (the audit's process), the Ray workers (processes titled ``ray::``, the pool's
   actors among them; the largest one and all together) and Ray's own daemons. Peak memory at two row counts
   says how the driver grows per row, beside what the per-row results need.

The classifier is the built-in MiniLM with a two-class head from a fixed seed, saved once into ``--work``: its
predictions mean nothing, its speed is a fine-tuned model's. Prints the tables and writes JSON (the machine's CPU
and flags, the versions, the date, every round and run) to ``--out``. A benchmark, not a test: nothing is
asserted; take figures on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bench_stacks  # builds (or finds again) the fused FP32 and INT8 graphs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

SCHEMA_VERSION = 1
ENGINES = ("local", "ray")
CLASSES = ["fresh", "rotten"]
QUICK = {"rows": 2000, "rounds": 2, "load_rows": [1000, 2000]}


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm", help="'minilm' (built in) or a checkpoint folder")
    p.add_argument("--rows", type=int, default=20000, help="reviews scored per engine, graph and round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--threads", type=int, default=2, help="local: the session's threads; ray: that many one-thread actors")
    p.add_argument("--batch-size", type=int, default=32, help="rows per scoring batch (the audit's --eval-batch-size)")
    p.add_argument("--max-length", type=int, default=128, help="tokens per text")
    p.add_argument("--load-rows", type=int, nargs="+", default=[50000, 200000], help="rows of each load run (at least two "
                   "sizes: the driver's growth per row is read between them)")
    p.add_argument("--preset", default="dynamic", help="the INT8 preset of the load runs")
    p.add_argument("--work", default="runs/bench/scale", help="where the graphs, the classifier and the data go")
    p.add_argument("--out", default="runs/bench/bench_scale.json", help="JSON file to write")
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK}")
    p.add_argument("--no-load", action="store_true", help="the throughput rounds only")
    a = p.parse_args(argv)
    if a.quick:
        a.rows, a.rounds, a.load_rows = QUICK["rows"], QUICK["rounds"], QUICK["load_rows"]
    return a


def bad_input(a) -> str:
    for name in ("rows", "rounds", "threads", "batch_size", "max_length"):
        if getattr(a, name) < 1:
            return f"bench_scale: --{name.replace('_', '-')} {getattr(a, name)} must be at least 1"
    if not a.no_load and (len(set(a.load_rows)) < 2 or min(a.load_rows) < 1):
        return f"bench_scale: --load-rows {a.load_rows}: give at least two different positive row counts, or --no-load"
    return ""


def reviews(n: int):
    """The built-in reviews (text, label) repeated until there are ``n`` rows."""
    from workbench.data.load import read_reviews_frame

    frame = read_reviews_frame()[["text", "label"]]
    return frame.iloc[[i % len(frame) for i in range(n)]].reset_index(drop=True)


def classifier(model: str, work: Path) -> Path:
    """``model`` with a two-class head (seed 0) saved into ``work/classifier``, once: the load runs' ``--model``."""
    folder = work / "classifier"
    if not (folder / "config.json").is_file():
        from workbench.models.load import load_for_data

        loaded = load_for_data(model, CLASSES, dropout=False)
        loaded.model.save_pretrained(str(folder))
        loaded.tokenizer.save_pretrained(str(folder))
    return folder


def throughput(a, graphs: dict[str, Path]) -> tuple[list[dict], dict]:
    """Interleaved rounds: each graph scored on ``a.rows`` reviews by both engines; rows per second per call."""
    import datasets

    from workbench.models.load import load_tokenizer
    from workbench.runtime.engine import EngineConfig, scoring_engine
    from workbench.runtime.ortinfer import make_session, predict_dataset
    from workbench.runtime.progress import scoring_progress

    ds = datasets.Dataset.from_pandas(reviews(a.rows), preserve_index=False)
    sessions = {g: make_session(p, threads=a.threads) for g, p in graphs.items()}
    rounds: list[dict] = []
    t0 = time.perf_counter()
    with scoring_engine(EngineConfig(engine="ray", ray_actors=a.threads, ray_threads=1), log=print) as pool:
        started = time.perf_counter() - t0
        for r in range(a.rounds):
            for g, path in graphs.items():
                order = ENGINES if r % 2 == 0 else ENGINES[::-1]  # alternating: drift falls on both
                row: dict = {"round": r, "graph": g, "order": list(order)}
                logits = {}
                for engine in order:
                    tok = load_tokenizer(a.model)  # a fresh tokenizer: no tokenization reused from another call
                    seen: list = []
                    t = time.perf_counter()
                    with scoring_progress(seen.append, every_s=0):
                        logits[engine] = predict_dataset(sessions[g] if engine == "local" else path, tok, ds, a.max_length,
                                                         a.batch_size, pool=pool if engine == "ray" else None)
                    row[f"{engine}_s"] = time.perf_counter() - t
                    row[f"{engine}_rows_per_s"] = a.rows / row[f"{engine}_s"]
                    row[f"{engine}_steady_rows_per_s"] = steady_rate(seen)
                row["overhead"] = 1 - row["ray_rows_per_s"] / row["local_rows_per_s"]
                row["classes_differ"] = int((logits["local"].argmax(-1) != logits["ray"].argmax(-1)).sum())
                row["max_abs_logit_diff"] = float(abs(logits["local"] - logits["ray"]).max())
                rounds.append(row)
                print(f"  round {r + 1}/{a.rounds} {g}: local {row['local_rows_per_s']:.0f} rows/s, ray "
                      f"{row['ray_rows_per_s']:.0f} rows/s ({100 * row['overhead']:+.1f}% overhead)", flush=True)
    return rounds, {"actors": pool.actors, "threads_per_actor": pool.threads, "ray_start_s": started}


def steady_rate(seen: list) -> float | None:
    """Rows per second from the first batch back to the last (the progress events of one call): the pool's start
    and its first batch left out, as they are paid once per graph whatever the row count."""
    done = [p for p in seen if p.rows > 0]
    if len(done) < 2 or done[-1].seconds <= done[0].seconds:
        return None
    return (done[-1].rows - done[0].rows) / (done[-1].seconds - done[0].seconds)


def summarize(rounds: list[dict], actors: int) -> dict:
    """Per graph: the median rows per second of each engine, the median paired overhead and its range, per actor."""
    out = {}
    for g in dict.fromkeys(r["graph"] for r in rounds):
        rs = [r for r in rounds if r["graph"] == g]
        med = {e: statistics.median(r[f"{e}_rows_per_s"] for r in rs) for e in ENGINES}
        over = [r["overhead"] for r in rs]
        steady = [r["ray_steady_rows_per_s"] for r in rs if r.get("ray_steady_rows_per_s")]
        per_actor = (statistics.median(steady) if steady else med["ray"]) / actors
        out[g] = {"local_rows_per_s": med["local"], "ray_rows_per_s": med["ray"], "overhead": statistics.median(over),
                  "overhead_min": min(over), "overhead_max": max(over), "per_actor_rows_per_s": per_actor,
                  "per_actor_from": "steady" if steady else "whole call", "classes_differ": max(r["classes_differ"] for r in rs)}
    return out


def _rss(proc) -> int:
    try:
        return proc.memory_info().rss
    except Exception:  # psutil.Error: the process ended between listing and reading
        return 0


def _title(proc) -> str:
    try:
        return " ".join(proc.cmdline())
    except Exception:  # psutil.Error
        return ""


def sample(root) -> dict:
    """Resident memory now: the driver, each Ray worker (``ray::`` titles), Ray's daemons, in bytes."""
    kids = root.children(recursive=True)
    workers = [_rss(k) for k in kids if _title(k).startswith("ray::")]
    return {"driver": _rss(root), "worker_max": max(workers, default=0), "workers": sum(workers),
            "daemons": sum(_rss(k) for k in kids if not _title(k).startswith("ray::"))}


START_TRIES = 3  # a busy machine can time Ray's start out (30 s, Ray's own limit): the load run is started again


def load_run(a, model: Path, rows: int, work: Path) -> dict:
    """A :func:`load_try`, again while Ray did not start (at most :data:`START_TRIES` times)."""
    for _ in range(START_TRIES):
        run = load_try(a, model, rows, work)
        if run["exit_code"] in (0, 3) or "could not start a local Ray instance" not in (work / f"load-{rows}.log").read_text():
            return run
    return run


def load_try(a, model: Path, rows: int, work: Path) -> dict:
    """``workbench audit --engine ray`` on ``rows`` reviews in its own process, its memory sampled every 0.5 s."""
    import psutil

    data = work / f"reviews-{rows}.parquet"
    if not data.is_file():
        reviews(rows).to_parquet(data, index=False)
    out = work / f"load-{rows}"
    argv = [sys.executable, "-m", "workbench.cli", "audit", "--model", str(model), "--data", str(data), "--presets", a.preset,
            "--quick", "--min-speedup", "0", "--engine", "ray", "--ray-actors", str(a.threads), "--out", str(out)]
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "PYTHONPATH": str(ROOT)}
    peak = {"driver": 0, "worker_max": 0, "workers": 0, "daemons": 0}
    t0 = time.perf_counter()
    with open(work / f"load-{rows}.log", "w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                now = sample(root)
            except psutil.Error:
                break
            peak = {k: max(peak[k], now[k]) for k in peak}
            time.sleep(0.5)
        code = proc.wait()
    seconds = time.perf_counter() - t0
    scored = json.loads((out / "summary.json").read_text())["data"]["rows_scored"] if (out / "summary.json").is_file() else None
    mib = {f"peak_{k}_mib": v / 2**20 for k, v in peak.items()}
    print(f"  load {rows} rows: exit {code}, {seconds:.0f} s, driver peak {mib['peak_driver_mib']:.0f} MiB, largest worker "
          f"{mib['peak_worker_max_mib']:.0f} MiB, workers {mib['peak_workers_mib']:.0f} MiB", flush=True)
    return {"rows": rows, "rows_scored": scored, "exit_code": code, "seconds": seconds, **mib, "argv": argv[2:]}


def growth(runs: list[dict], graphs: int) -> dict | None:
    """The driver's peak growth per row between the smallest and the largest load run that completed, beside the
    bytes a row's results take (two float32 logits per graph scored); None with fewer than two such runs."""
    done = [r for r in runs if r["exit_code"] in (0, 3)]  # 3: the audit completed, no variant within its budgets
    if len({r["rows"] for r in done}) < 2:
        return None
    small, big = min(done, key=lambda r: r["rows"]), max(done, key=lambda r: r["rows"])
    per_row = (big["peak_driver_mib"] - small["peak_driver_mib"]) * 2**20 / (big["rows"] - small["rows"])
    return {"driver_bytes_per_row": per_row, "results_bytes_per_row": graphs * len(CLASSES) * 4,
            "from_rows": small["rows"], "to_rows": big["rows"]}


def table(summary: dict, pool: dict) -> str:
    lines = [f"{'graph':<20} {'local rows/s':>13} {'ray rows/s':>11} {'overhead [range]':>24} {'per actor':>10}"]
    for g, s in summary.items():
        span = f"{100 * s['overhead']:+.1f}% [{100 * s['overhead_min']:+.1f}, {100 * s['overhead_max']:+.1f}]"
        lines.append(f"{g:<20} {s['local_rows_per_s']:>13.0f} {s['ray_rows_per_s']:>11.0f} {span:>24} "
                     f"{s['per_actor_rows_per_s']:>10.0f}")
    lines.append(f"ray: {pool['actors']} actor(s) of {pool['threads_per_actor']} thread(s); Ray started in {pool['ray_start_s']:.1f} s")
    return "\n".join(lines)


# the packages whose versions the JSON records
VERSIONS = ("ray", "onnxruntime", "onnxruntime-training", "onnxruntime-training-cpu", "numpy", "transformers", "pyarrow")


def main(argv=None) -> int:
    a = _args(argv)
    refusal = bad_input(a)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    from workbench.runs import atomic_write_json

    t0 = time.perf_counter()
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    info = bench_stacks.machine()
    built = bench_stacks.build_graphs(a.model, work / "graphs")
    graphs = {g: work / "graphs" / rel for g, rel in built["graphs"].items()}
    print(f"\n{info['cpu_model']}: {a.rows} reviews, {a.rounds} interleaved rounds, local {a.threads} threads against ray "
          f"{a.threads} one-thread actors", flush=True)
    from workbench.runtime.engine import EngineError

    for tries_left in reversed(range(START_TRIES)):
        try:
            rounds, pool = throughput(a, graphs)
            break
        except EngineError as exc:  # Ray did not start (a busy machine can time its start out): again, then one line
            if not tries_left:
                print(f"bench_scale: {exc}", file=sys.stderr)
                return 1
    summary = summarize(rounds, pool["actors"])
    print(table(summary, pool), flush=True)
    loads = [] if a.no_load else [load_run(a, classifier(a.model, work), n, work) for n in sorted(set(a.load_rows))]
    grown = growth(loads, graphs=2)
    if grown:
        print(f"driver memory from {grown['from_rows']} to {grown['to_rows']} rows: {grown['driver_bytes_per_row']:.0f} bytes "
              f"a row (the results need {grown['results_bytes_per_row']})")
    info["load_avg_end"] = list(os.getloadavg())
    result = {"schema_version": SCHEMA_VERSION, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": info,
              "versions": bench_stacks.installed_versions(VERSIONS),
              "model": a.model, "rows": a.rows, "rounds": a.rounds, "threads": a.threads,
              "batch_size": a.batch_size, "max_length": a.max_length, "quick": a.quick, "graphs": built["graphs"],
              "pool": pool, "throughput": summary, "round_rows": rounds, "load": loads, "load_growth": grown,
              "load_preset": a.preset, "seconds": time.perf_counter() - t0}
    atomic_write_json(Path(a.out), result)
    print(f"wrote {a.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
