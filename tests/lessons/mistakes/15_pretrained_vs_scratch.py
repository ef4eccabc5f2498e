"""Plausible wrong answers to lesson 15's exercises (see README.md)."""


def my_encoder_into_head__everything(pretrained_params, task_params):
    return {**task_params, **pretrained_params}  # the pretraining heads come along


def my_control_params__fresh_head_too(task_params, config, seed):
    from minibert.model import init_params
    dtype = next(iter(task_params.values())).dtype
    fresh = init_params(config, seed, dtype)
    rng = np.random.default_rng([seed, 1])  # noqa: F821  a new head, drawn as the constructor draws one
    x = rng.standard_normal(task_params["cls.w"].shape)
    while (np.abs(x) > 2).any():  # noqa: F821
        x[np.abs(x) > 2] = rng.standard_normal(int((np.abs(x) > 2).sum()))  # noqa: F821
    head = {"cls.w": (x * config.initializer_range).astype(dtype),
            "cls.b": np.zeros_like(task_params["cls.b"])}  # noqa: F821
    return {name: head[name] if name.startswith("cls.") else fresh[name] for name in task_params}


def my_control_params__seed_ignored(task_params, config, seed):
    from minibert.model import init_params
    fresh = init_params(config, 0, next(iter(task_params.values())).dtype)  # always seed 0
    return {name: value.copy() if name.startswith("cls.") else fresh[name] for name, value in task_params.items()}

