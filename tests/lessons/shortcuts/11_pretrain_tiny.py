"""Lesson 11's exercises answered by the library (see README.md): the grader must refuse them."""


def my_update_size(t, b1=0.9, b2=0.999):
    t = np.asarray(t)  # noqa: F821
    out = []
    for steps in t.reshape(-1):
        p = {"w": np.zeros(1)}  # noqa: F821
        opt = optim.AdamW(p, lr=1.0, beta1=b1, beta2=b2, eps=0.0, weight_decay=0.0)  # noqa: F821
        for _ in range(int(steps)):
            before = p["w"].copy()
            opt.step({"w": np.ones(1)})  # noqa: F821
        out.append(float(before[0] - p["w"][0]))
    return np.array(out).reshape(t.shape)  # noqa: F821


def my_lr(t, peak, W, T):
    return optim.lr_at(t, peak, W, T)  # noqa: F821


def my_clip(grads, max_norm):
    return optim.clip_by_global_norm(grads, max_norm)[0]  # noqa: F821
