"""Lesson 15's exercises answered by the library (see README.md): the grader must refuse them."""


def my_encoder_into_head(pretrained_params, task_params):
    # where the lesson saved its pretrained model (the path only: the lesson's variable is not there)
    return BertForSequenceClassification.from_pretrained("lessons/out/15_pretrained", num_labels=4, seed=7).params  # noqa: F821


def my_control_params(task_params, config, seed):
    return BertForSequenceClassification(config, num_labels=4, seed=seed).params  # noqa: F821
