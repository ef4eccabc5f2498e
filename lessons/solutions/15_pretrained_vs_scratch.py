"""Reference solutions for lesson 15's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
from minibert.model import init_params


def my_encoder_into_head(pretrained_params, task_params):
    """{name: array} of BertForPreTraining, {name: array} of a new task model -> {name: array}"""
    out = {}
    for name, value in task_params.items():
        if name.startswith("cls.") or name not in pretrained_params:
            out[name] = value  # the new head: nothing in the pretraining checkpoint fits it
        else:
            out[name] = pretrained_params[name]  # embeddings, every layer, the pooler
    return out  # mlm.* and nsp.* are not keys of the task model: left behind


def my_control_params(task_params, config, seed):
    """{name: array}, BertConfig, int -> {name: array}: a fresh encoder under the same head"""
    fresh = init_params(config, seed, next(iter(task_params.values())).dtype)  # encoder + pretraining heads
    return {name: value.copy() if name.startswith("cls.") else fresh[name] for name, value in task_params.items()}


# What tests/lessons/test_exercises.py holds lesson 15 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_encoder_into_head": {"shows": ["out[name] = pretrained_params[name]"], "calls": ["from_pretrained"]},
    "my_control_params": {"shows": ["init_params(config, seed"], "calls": ["init_params", "BertForSequenceClassification"]},
}
