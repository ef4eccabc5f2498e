"""`python -m minibert gradcheck`: every float64 gradient check of minibert in one table: the layers and
BERT (minibert/analysis/gradcheck.py), the family's models (family/gradchecks.py), the fine-tuning classes
(finetune/gradchecks.py)."""
from __future__ import annotations

import numpy as np

from minibert.io.cli import command_parser
from minibert.family.gradchecks import (check_albert, check_cross_attention, check_electra, check_t5,
                                        check_t5_decoder_block)
from minibert.finetune.gradchecks import (check_bilstm, check_electra_finetune, check_heads, check_task_models,
                                          check_weighted_classifier)
from minibert.analysis.gradcheck import (ATOL, HEADER, LAYER_CHECKS, RTOL, check_causal_attention, check_model,
                                check_objective_model)
from minibert.backend import backend_name


def all_checks(seed=0, verbose=True):
    # lazy: keeps Numba out of the start of `python -m minibert gradcheck`
    from minibert import kernels, layers

    rng = np.random.default_rng(seed)
    checks = []
    for fn in LAYER_CHECKS:
        checks += fn(rng, verbose)
    checks += check_model(rng, verbose)
    checks += check_heads(rng, verbose)
    checks += check_task_models(rng, verbose)
    # the pretraining variants (appended: the checks above keep their random draws)
    for ops in (layers, kernels):
        checks += check_causal_attention(rng, verbose, ops)
    checks += check_objective_model(rng, verbose, "ltr")
    checks += check_objective_model(rng, verbose, "mlm")
    checks += check_albert(rng, verbose)  # ALBERT (appended, as above)
    checks += check_electra(rng, verbose)  # ELECTRA (appended, as above)
    checks += check_electra_finetune(rng, verbose)  # ELECTRA's fine-tuning classes (appended, as above)
    checks += check_cross_attention(rng, verbose)  # T5 (appended, as above)
    checks += check_t5_decoder_block(rng, verbose)
    checks += check_t5(rng, verbose)
    checks += check_bilstm(rng, verbose)  # the feature-based BiLSTM tagger (appended, as above)
    checks += check_weighted_classifier(rng, verbose)  # the class-weighted loss (appended, as above)
    return checks


def cli(argv: list[str]) -> int:
    ap = command_parser("gradcheck", "Print every float64 gradient check (layers and whole model).")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.seed < 0:  # before the table's header; NumPy's own error named no setting
        raise ValueError(f"--seed {args.seed} must be >= 0")

    print(f"backend: {backend_name()}   pass rule: |a - n| <= {ATOL:g} + {RTOL:g} * |n|  (float64)")
    print("CS231n reading of max_rel: < 1e-7 good, 1e-7..1e-4 look closer, > 1e-2 wrong")
    print(HEADER)
    checks = all_checks(args.seed)
    failed = [c.name for c in checks if not c]
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
