"""`python -m minibert bench` (make bench): how fast minibert is, next to PyTorch, in one run.

Sections (select with --only, comma-separated; they run in the order step, profile, sst2,
attention, finetune, startup, coldstart, text, data, so that --time-limit drops the least needed ones):
    step       one full pretraining step (forward, backward, clipping, AdamW) on the tiny, small,
               minilm (the shape of all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, vocabulary
               30,522) and base (one layer of BERT-base: hidden 768, FF 3072) configs: minibert
               (numba and numpy backends) vs transformers' BertForPreTraining in PyTorch eager (MLM
               logits only at the masked positions); tokens/s, achieved matmul GFLOP/s and the
               float32 matmul peak at the same thread count; with several thread counts, the
               speed-up from 1 thread and the serial part it implies (Amdahl)
    attention  attention forward+backward: Numba kernels (v4 default, v3, v2, v1) vs NumPy reference vs
               PyTorch eager
    finetune   a fine-tuning step: sequence classification (B=32, T=128) on every config and question
               answering (B=8, T=384) on the small ones, minibert's class vs transformers' of the same name
    profile    where the step's time goes, part by part, at 1 thread and at the most threads asked
               for, the speed-up of each part and the serial milliseconds it implies, next to
               PyTorch's step cut by operator kind (torch.profiler) (minibert.tools.bench_profile)
    sst2       a fine-tuning epoch of SST-2 with real sentence lengths (--data DIR with train.tsv,
               dev.tsv): minibert (its unpadded path) vs transformers with dynamic padding, the same
               batches in the same order; wall time and dev accuracy (minibert.tools.bench_sst2)
    startup    Numba compile time on a cold cache; import + first step on a warm cache
    coldstart  seconds to train-tiny's first step and to the end of lesson 06 in a fresh copy of the
               repository, cold (Numba's cache empty) and warm (minibert.tools.bench_coldstart)
    text       WordPiece training and tokenizer speed (minibert.tools.bench_text)
    data       pretraining-data throughput (minibert.tools.bench_data) vs what training consumes
    spam       (only with --only spam: minutes) a spam filter on made-up SMS messages, all-MiniLM-L6-v2
               fine-tuned by minibert's `finetune` and by transformers' Trainer at the same split and
               recipe; spam precision, recall, F1 and wall time, --rounds runs each (minibert.tools.bench_spam)

Threads: `--threads 1,2,4,8,16` runs the step, attention and finetune sections at each count
(the counts above the machine's cores are left out; profile runs at 1 and the most, sst2 at the
most), every contender in its own worker
processes with NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set
and torch.set_num_threads(n); every table names its thread count. Without --threads, one count:
the machine's cores. `--quick` keeps a run on a 16-core machine within about 8 minutes: one
round of at most 3 repetitions (or 4 s) per worker, the fast contenders only, the fine-tuning
steps at the most threads, a 2,048-sentence SST-2 subset.

Every figure is the median of several repetitions (after one warm-up); ratios are computed
from the medians. The attention and step contenders each run in their own worker processes,
taking turns (see `isolated_medians`), so that one library's idle threads do not slow another.
The figures go to a JSON file (default bench/results.json, git-ignored), rewritten after every
section, so an interrupted run keeps what it measured. torch and transformers are optional:
their columns say "n/a" when they are not installed.

The modules: this one is the command (its sections, in order, and the workers' dispatch);
bench_common the configs, worker processes and tables every section shares; one module per
section: bench_step (step and profile), bench_attention, bench_finetune, bench_sst2,
bench_startup, bench_text, bench_data; bench_profile the profile's parts. A worker process runs
this module (`python -m minibert.tools.bench --worker KIND ...`), which hands KIND to the section
in WORKERS: every section is imported here by name, so the layering test sees each arrow, and
all of them point down. A new section: a module beside these, a name in SECTIONS, a line in
`cli`, and its worker kinds in WORKERS (timed contenders) or REPORTS (JSON of its own).
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from minibert.backend import backend_name
from minibert.io.cli import command_parser
from minibert.io.outputs import check_output, write_output
from minibert.tools import (bench_attention, bench_coldstart, bench_common, bench_finetune, bench_spam, bench_sst2,
                            bench_startup, bench_step)
from minibert.tools.bench_common import (CONFIGS, ROOT, fmt_table, n_threads, parse_threads, run_worker, threads_label,
                                         time_contender)
from minibert.tools.bench_profile import cpu_description

SECTIONS = ("step", "attention", "finetune", "profile", "sst2", "startup", "coldstart", "text", "data", "spam")
OPT_IN = ("spam",)  # run only when --only names them

# worker kind -> the function that builds one contender (spec, name) -> fn, timed by time_contender
WORKERS = {
    "step": bench_step.step_fn,
    "attention": lambda spec, name: bench_attention.attention_fn(tuple(spec), name),
    "finetune": bench_finetune.finetune_step_fn,
    "qa": bench_finetune.qa_step,
}
# worker kind -> a function (spec, name, reps) -> the JSON-ready result it measures itself
REPORTS = {
    "profile": lambda spec, name, reps: bench_step.profile_worker(spec, reps),
    "torch-profile": lambda spec, name, reps: bench_step.torch_profile(spec, reps),
    "peak": lambda spec, name, reps: {"gflops": bench_step.matmul_peak(reps, int(spec)), "threads": n_threads()},
    "sst2": lambda spec, name, reps: bench_sst2.run_contender(spec, name),
}


def worker(argv: list[str]) -> None:
    """Inside a worker process (bench_common.run_worker started it): build one contender of KIND,
    time it and print the result as JSON (REPORTS' kinds measure and print their own)."""
    kind, spec, name, reps, warmup = argv[0], json.loads(argv[1]), argv[2], int(argv[3]), int(argv[4])
    if kind in REPORTS:
        print(json.dumps(REPORTS[kind](spec, name, reps)))
        return
    print(json.dumps(time_contender(WORKERS[kind](spec, name), reps, warmup)))


# ---------------------------------------------------------------------------------------------
# text and data (other modules; skipped with a note when missing)

def bench_text_and_data(report: dict, sections) -> None:
    if "text" in sections:
        try:
            # lazy: the function handles this import failing
            from minibert.tools import bench_text
        except ImportError as e:
            print(f"\n== text: skipped (minibert.tools.bench_text not importable: {e})")
        else:
            print("\n== text")
            bench_text.bench_wordpiece(report)
            bench_text.bench_tokenizer(report)
    if "data" in sections:
        try:
            # lazy: the function handles this import failing
            from minibert.tools import bench_data
        except ImportError as e:
            print(f"\n== data: skipped (minibert.tools.bench_data not importable: {e})")
            return
        print("\n== data")
        bench_data.bench_data(report)
        data, step = report.get("data") or {}, (report.get("step") or {}).get("tiny")
        if step is None:
            print("data vs training: run with the step section to get the ratio")
            return
        consume = step["tokens_per_s_numba"]
        ratios = {k: data[k] / consume for k in ("generation_tokens_per_s", "batch_dynamic_tokens_per_s") if k in data}
        report["data_vs_training"] = {"training_tokens_per_s": consume, **{f"ratio_{k}": v for k, v in ratios.items()}}
        for k, v in ratios.items():
            print(f"data vs training: {k} / tiny-step tokens/s ({consume:,.0f}) = {v:.1f}x   (target >= 5x)")


# ---------------------------------------------------------------------------------------------
# command line

def cli(argv: list[str]) -> int:
    ap = command_parser("bench", __doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 round of at most 3 repetitions (4 s) per worker, v4/v3/torch attention only, the "
                         "fine-tuning steps at the most threads only (QA on tiny), a 2,048-sentence SST-2 subset, "
                         "no matmul floor or numpy backend (a 16-core machine: about 8 minutes at 1,2,4,8,16)")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated sections to run (default: all of "
                         f"{','.join(s for s in SECTIONS if s not in OPT_IN)}; sst2 needs --data; "
                         f"--quick: step,attention,finetune,profile,sst2; {','.join(OPT_IN)} only when named)")
    ap.add_argument("--threads", default=None,
                    help="comma-separated thread counts, e.g. 1,2,4,8,16: the step, attention and finetune "
                         "sections run at each (default: the machine's cores); profile at 1 and the most; sst2 at "
                         "the most")
    ap.add_argument("--configs", default=None,
                    help=f"comma-separated configs of the step and finetune sections (default: all of "
                         f"{','.join(CONFIGS)}); profile: tiny and minilm of them")
    ap.add_argument("--data", default=None, help="a directory with SST-2's train.tsv and dev.tsv (the sst2 section)")
    ap.add_argument("--sst2-train", type=int, default=None,
                    help="sentences of SST-2's train.tsv to fine-tune on, the first ones (default: all; --quick 2048)")
    ap.add_argument("--vocab", default=None,
                    help="vocab.txt for SST-2 (default: vocab.txt in --data, else a WordPiece vocabulary learnt "
                         "from the training sentences)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results.json"), help="where to write the figures")
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"worker processes per contender for attention, step and finetune, taking turns "
                         f"(default {bench_common.ROUNDS}, --quick 1); more rounds, steadier medians on a noisy machine")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions in each worker (default 7, --quick 3)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="minutes after which no further section starts (the sections run in the order step, "
                         "profile, sst2, attention, finetune, startup, coldstart, text, data)")
    args = ap.parse_args(argv)
    bench_common.ROUNDS = max(1, args.rounds if args.rounds is not None else
                              (1 if args.quick else bench_common.ROUNDS))  # for every section
    default = "step,attention,finetune,profile,sst2" if args.quick else ",".join(s for s in SECTIONS if s not in OPT_IN)
    sections = [s.strip() for s in (args.only or default).split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    configs = [c.strip() for c in (args.configs or ",".join(CONFIGS)).split(",") if c.strip()]
    if [c for c in configs if c not in CONFIGS]:
        ap.error(f"unknown config(s) {[c for c in configs if c not in CONFIGS]}; choose from {list(CONFIGS)}")
    cores = os.cpu_count() or 1
    try:
        threads_list, left_out = parse_threads(args.threads, cores)
    except ValueError as e:
        ap.error(str(e))
    if not threads_list:
        ap.error(f"--threads {args.threads}: every count is above this machine's {cores} cores")
    reps = args.reps or (3 if args.quick else 7)

    check_output(args.json, inputs=[args.data, args.vocab], flag="--json")  # before minutes of benchmarks
    started = time.perf_counter()
    report = {"machine": {"cores": cores, "threads": threads_list, "platform": platform.platform(),
                          "python": platform.python_version(), "numpy": np.__version__},
              "quick": args.quick, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sections_s": {}}

    report["machine"]["cpu"] = cpu_description()
    print(f"minibert bench: {cores} cores, threads {threads_label(threads_list)}"
          + (f" (left out, above the cores: {threads_label(left_out)})" if left_out else "")
          + f", numpy {np.__version__}, MINIBERT_BACKEND={backend_name()}; every figure is a median"
          f"\nCPU: {report['machine']['cpu']}", flush=True)

    def save() -> Path:
        return write_output(args.json, json.dumps(report, indent=2, default=float) + "\n")

    bench_common.SAVE = save  # the sections save after every row
    if args.quick:  # each worker's timed runs stop after 4 s (at least one run): the 1-thread steps of minilm
        os.environ.setdefault("MINIBERT_BENCH_BUDGET_S", "4")  # and base take seconds each

    def run(section, fn) -> None:
        if section not in sections:
            return
        if args.time_limit is not None and time.perf_counter() - started > 60 * args.time_limit:
            print(f"\n== {section}: skipped (--time-limit {args.time_limit:g} minutes reached)", flush=True)
            report["sections_s"][section] = None
            return
        t0 = time.perf_counter()
        fn()
        report["sections_s"][section] = time.perf_counter() - t0
        print(f"[{section}: {time.perf_counter() - t0:.0f} s]", flush=True)
        save()

    if any(sec in sections for sec in ("step", "attention", "finetune", "profile", "sst2")):
        # Numba compiles each kernel on its first call and caches it on disk: on a fresh checkout
        # the first worker would time the compiling. One untimed step of each kind first.
        t0 = time.perf_counter()
        for kind, spec in (("step", "tiny"), ("finetune", "tiny"), ("attention", list(bench_attention.ATTENTION_SHAPES[0]))):
            run_worker(kind, spec, 1, "numba", 0, threads=threads_list[0])
        print(f"[kernels compiled or loaded from Numba's cache: {time.perf_counter() - t0:.0f} s]", flush=True)
    quick_configs = [c for c in configs if c in ("tiny", "minilm")] or configs[:1]
    run("step", lambda: bench_step.bench_step(report, reps, numpy_reps=0 if args.quick else 3, configs=configs,
                                   threads_list=threads_list))
    run("profile", lambda: bench_step.bench_profile(report, reps, quick_configs if args.quick else configs, threads_list,
                                         floor=not args.quick))
    if "sst2" in sections:
        if args.data is None:
            print("\n== sst2: skipped (give --data DIR with SST-2's train.tsv and dev.tsv)")
        else:
            limit = args.sst2_train if args.sst2_train is not None else (2048 if args.quick else None)
            run("sst2", lambda: bench_sst2.bench_sst2(report, args.data, threads_list, limit=limit, vocab=args.vocab,
                                                      configs=("tiny", "minilm"), run_worker=run_worker,
                                                      fmt_table=fmt_table))
    run("attention", lambda: bench_attention.bench_attention(report, reps, threads_list, quick=args.quick))
    run("finetune", lambda: bench_finetune.bench_finetune(report, reps, configs=configs,  # --quick: at the most threads only
                                           threads_list=threads_list[-1:] if args.quick else threads_list,
                                           qa_configs=("tiny",) if args.quick else bench_finetune.QA_CONFIGS,
                                           qa_shapes=bench_finetune.QA_SHAPES[:1] if args.quick else bench_finetune.QA_SHAPES))
    run("startup", lambda: bench_startup.bench_startup(report, 2 if args.quick else 3))
    run("coldstart", lambda: bench_coldstart.bench_coldstart(report, fmt_table))
    if "text" in sections or "data" in sections:
        t0 = time.perf_counter()
        bench_text_and_data(report, sections)
        report["sections_s"]["text+data"] = time.perf_counter() - t0
    run("spam", lambda: bench_spam.bench_spam(report, Path(args.json).with_name("spam"),
                                              repeats=args.rounds if args.rounds is not None else 1))
    path = save()
    total = sum(v for v in report["sections_s"].values() if v)
    print(f"\nwrote {path} ({total:.0f} s of sections: "
          + ", ".join(f"{k} {v:.0f} s" if v is not None else f"{k} skipped" for k, v in report["sections_s"].items())
          + ")")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(sys.argv[2:])
