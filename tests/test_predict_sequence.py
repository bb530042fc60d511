"""The token-sequence model of LS-CAT kernels (adaptune.predict.sequence): tokens, a vocabulary from
the training fold only, the shared repository-grouped folds, and (with torch) a model that learns."""

import numpy as np
import pytest
from sklearn.model_selection import GroupKFold

from adaptune.predict import model, sequence


def test_tokenize_keeps_order_and_drops_comments():
    src = "// row-major\n__global__ void k(float *a, int n) { /* x */ a[i*n+j] = 0; }"
    toks = sequence.tokenize(sequence.strip_comments(src))
    assert "row" not in toks and "x" not in toks
    assert toks[:4] == ["__global__", "void", "k", "("]
    i = toks.index("[")
    assert toks[i:i + 7] == ["[", "i", "*", "n", "+", "j", "]"]
    assert sequence.tokenize("a[j*n+i]") != sequence.tokenize("a[i*n+j]")  # order is kept


def test_vocabulary_from_training_kernels_only_and_rare_tokens_unknown():
    train = [["a", "b", "shared"], ["a", "b"], ["a", "once"]]
    vocab = sequence.Vocabulary.build(train, min_kernels=2)
    assert set(vocab.ids) == {"a", "b"}                 # "shared" and "once" occur in one kernel only
    assert vocab.ids["a"] == 2 and vocab.ids["b"] == 3  # most frequent first, after PAD and UNK
    assert len(vocab) == 4
    test_only = ["a", "test_repo_token", "b"]
    np.testing.assert_array_equal(vocab.encode(test_only), [2, sequence.UNK, 3])
    np.testing.assert_array_equal(vocab.encode(["a"] * 10, max_len=4), [2, 2, 2, 2])
    capped = sequence.Vocabulary.build(train, min_kernels=1, max_size=1)
    assert set(capped.ids) == {"a"}


def test_pad_right_pads_and_truncates():
    m = sequence.pad([np.array([5, 6, 7]), np.array([8])])
    np.testing.assert_array_equal(m, [[5, 6, 7], [8, sequence.PAD, sequence.PAD]])
    np.testing.assert_array_equal(sequence.pad([np.array([5, 6, 7])], length=2), [[5, 6]])
    assert sequence.pad([np.array([], dtype=np.int64)]).shape == (1, 1)


def test_group_folds_are_the_forests_folds_and_keep_repositories_apart():
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 30, 200).astype(str)
    x = rng.normal(size=(200, 3))
    ours = model.group_folds(200, groups, seed=3)
    ref = list(GroupKFold(n_splits=5, shuffle=True, random_state=3).split(x, groups=groups))
    for (tr, te), (rtr, rte) in zip(ours, ref, strict=True):
        np.testing.assert_array_equal(tr, rtr)
        np.testing.assert_array_equal(te, rte)
        assert not set(groups[tr]) & set(groups[te])


def _synthetic(n_kernels: int = 120):
    """Kernels whose best shape depends on a token and its order: ``a[i*n+j]`` -> shape 3 at every size,
    ``a[j*n+i]`` -> shape 12, with noise tokens around; every kernel its own repository."""
    rng = np.random.default_rng(1)
    tokens, kernel, size, perf = {}, [], [], []
    for k in range(n_kernels):
        good = k % 2 == 0
        body = ["a", "[", "i", "*", "n", "+", "j", "]"] if good else ["a", "[", "j", "*", "n", "+", "i", "]"]
        noise = [f"v{rng.integers(0, 8)}" for _ in range(int(rng.integers(3, 12)))]
        tokens[f"r{k}/0"] = ["__global__", "void", "k", "(", *noise, ")", "{", *body, "=", "0", ";", "}"]
        for s in (64, 512, 4096):
            p = rng.uniform(0.5, 0.8, 20)
            p[3 if good else 12] = 1.0
            kernel.append(f"r{k}/0")
            size.append(s)
            perf.append(p)
    return tokens, np.array(kernel), np.array(size), np.array(perf)


def test_sequence_model_learns_an_order_dependent_best_shape_and_is_deterministic():
    pytest.importorskip("torch")
    tokens, kernel, size, perf = _synthetic()
    cfg = sequence.SeqConfig(embed=16, channels=32, hidden=32, epochs=30, kernels_per_batch=16, lr=3e-3)
    groups = np.array([k.split("/")[0] for k in kernel])
    choice, common = sequence.grouped_cv_choices(tokens, kernel, size, perf, groups, seed=0, cfg=cfg)
    best = perf.argmax(axis=1)
    assert (choice == best).mean() > 0.9      # a bag of tokens cannot tell the two kernels apart
    assert (common == best).mean() < 0.6
    train = kernel != "r0/0"
    a = sequence.SequenceModel(cfg, seed=5).fit(tokens, kernel[train], size[train], perf[train])
    b = sequence.SequenceModel(cfg, seed=5).fit(tokens, kernel[train], size[train], perf[train])
    np.testing.assert_array_equal(a.predict(tokens, kernel[~train], size[~train]),
                                  b.predict(tokens, kernel[~train], size[~train]))
    assert a.predict(tokens, kernel[~train], size[~train]).shape == (3, 20)
