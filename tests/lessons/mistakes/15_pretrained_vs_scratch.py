"""Plausible wrong answers to lesson 15's exercises (see README.md)."""


def my_encoder_into_head__everything(pretrained_params, task_params):
    return {**task_params, **pretrained_params}  # the pretraining heads come along


def my_control_params__fresh_head_too(task_params, config, seed):
    from minibert.model import init_params
    fresh = init_params(config, seed + 1, next(iter(task_params.values())).dtype)
    return {name: fresh[name] if name in fresh else value * 0.5 for name, value in task_params.items()}  # a new head as well
