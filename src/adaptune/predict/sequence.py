"""A token-sequence model of a kernel's source (the LS-CAT thesis tried an LSTM): token ids in order,
an embedding, a 1-D convolution with global max-pool, and the sample's size, regressing the 20 shapes'
relative performance. Unlike the bag-of-tokens forest it sees token order (``a[i*n+j]`` vs ``a[j*n+i]``).

Tokenising and the vocabulary need no torch; the network imports torch lazily (``pip install
adaptune[seq]``). The vocabulary is built from the training fold's kernels only, so no token of a test
repository leaks into the model, and the folds are the forests' folds (``model.group_folds``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptune.predict import metric
from adaptune.predict.model import group_folds

TOKEN_PATTERN = r"[A-Za-z_]\w*|\d+|[^\w\s]"  # identifiers, integers, single punctuation characters
PAD, UNK = 0, 1
_TOKEN_RE = re.compile(TOKEN_PATTERN)
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def strip_comments(source: str) -> str:
    """Source without C/C++ comments (they carry no behaviour, and differ between copies of one kernel)."""
    return _COMMENT_RE.sub(" ", source)


def tokenize(text: str) -> list[str]:
    """Tokens of a (comment-free) source in order, with the same pattern as the TF-IDF token features."""
    return _TOKEN_RE.findall(text)


@dataclass
class Vocabulary:
    """Token -> id; 0 is padding, 1 stands for every token not in the vocabulary."""

    ids: dict[str, int]

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_kernels: int = 2, max_size: int = 4000
              ) -> Vocabulary:
        """Tokens that occur in at least ``min_kernels`` of the given (training) kernels, most frequent
        first, at most ``max_size``; the rest become UNK."""
        df: Counter[str] = Counter()
        for toks in token_lists:
            df.update(set(toks))
        kept = sorted((t for t, c in df.items() if c >= min_kernels), key=lambda t: (-df[t], t))[:max_size]
        return cls({t: i + 2 for i, t in enumerate(kept)})

    def __len__(self) -> int:
        return len(self.ids) + 2

    def encode(self, tokens: Sequence[str], max_len: int = 384) -> np.ndarray:
        """Ids of the first ``max_len`` tokens (not padded)."""
        return np.array([self.ids.get(t, UNK) for t in tokens[:max_len]], dtype=np.int64)


def pad(seqs: Sequence[np.ndarray], length: int | None = None) -> np.ndarray:
    """(n, length) id matrix, right-padded with PAD; ``length`` defaults to the longest (at least 1)."""
    n = max([1, *(len(s) for s in seqs)]) if length is None else length
    out = np.full((len(seqs), n), PAD, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :min(len(s), n)] = s[:n]
    return out


@dataclass
class SeqConfig:
    """Sizes and training schedule, fixed before any score was seen (not tuned on the CV folds)."""

    max_len: int = 384
    min_kernels: int = 2
    vocab_size: int = 4000
    embed: int = 32
    channels: int = 64
    width: int = 5
    hidden: int = 64
    epochs: int = 12
    kernels_per_batch: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4


def size_features(size: np.ndarray) -> np.ndarray:
    """log2 of the matrix size, centred and scaled over LS-CAT's sizes (2^6..2^12), and its square."""
    z = (np.log2(np.asarray(size, dtype=float)) - 9.0) / 3.0
    return np.stack([z, z * z], axis=1).astype(np.float32)


def _network(n_vocab: int, n_out: int, cfg: SeqConfig):
    import torch
    from torch import nn

    class Net(nn.Module):
        """Embedding -> Conv1d -> ReLU -> max over valid positions; concat size features -> MLP -> 20."""

        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(n_vocab, cfg.embed, padding_idx=PAD)
            self.conv = nn.Conv1d(cfg.embed, cfg.channels, cfg.width, padding=cfg.width // 2)
            self.head = nn.Sequential(nn.Linear(cfg.channels + 2, cfg.hidden), nn.ReLU(),
                                      nn.Linear(cfg.hidden, n_out))

        def encode(self, ids: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.conv(self.emb(ids).transpose(1, 2)))          # (k, C, L)
            h = h.masked_fill((ids == PAD).unsqueeze(1), float("-inf"))
            return h.max(dim=2).values                                         # (k, C)

        def forward(self, ids: torch.Tensor, kidx: torch.Tensor, sz: torch.Tensor) -> torch.Tensor:
            return self.head(torch.cat([self.encode(ids)[kidx], sz], dim=1))

    return Net()


class SequenceModel:
    """Fit on (kernel tokens, size) -> 20 relative performances with MSE, predict, choose the argmax.
    MSE on ``min/time`` is what the forests minimise too: the prediction estimates each shape's expected
    score, so the argmax targets the seed's metric."""

    def __init__(self, cfg: SeqConfig | None = None, seed: int = 0) -> None:
        self.cfg, self.seed = cfg or SeqConfig(), seed
        self.vocab: Vocabulary | None = None
        self.net = None

    def fit(self, tokens: dict[str, list[str]], kernel: np.ndarray, size: np.ndarray, perf: np.ndarray
            ) -> SequenceModel:
        import torch

        cfg = self.cfg
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        kernels = sorted(set(kernel))
        self.vocab = Vocabulary.build((tokens[k] for k in kernels), cfg.min_kernels, cfg.vocab_size)
        enc = {k: self.vocab.encode(tokens[k], cfg.max_len) for k in kernels}
        rows = {k: np.flatnonzero(kernel == k) for k in kernels}
        self.net = _network(len(self.vocab), perf.shape[1], cfg)
        with torch.no_grad():  # start at the training mean of each shape
            self.net.head[-1].bias.copy_(torch.as_tensor(perf.mean(axis=0), dtype=torch.float32))
        opt = torch.optim.AdamW(self.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        szf, y = size_features(size), perf.astype(np.float32)
        self.net.train()
        for _ in range(cfg.epochs):
            order = rng.permutation(len(kernels))
            for b in range(0, len(order), cfg.kernels_per_batch):
                batch = [kernels[i] for i in order[b:b + cfg.kernels_per_batch]]
                ids = torch.as_tensor(pad([enc[k] for k in batch]))
                r = np.concatenate([rows[k] for k in batch])
                kidx = torch.as_tensor(np.concatenate([np.full(len(rows[k]), j) for j, k in enumerate(batch)]))
                pred = self.net(ids, kidx, torch.as_tensor(szf[r]))
                loss = torch.mean((pred - torch.as_tensor(y[r])) ** 2)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return self

    def predict(self, tokens: dict[str, list[str]], kernel: np.ndarray, size: np.ndarray) -> np.ndarray:
        """(n, 20) predicted relative performance of each sample."""
        import torch

        assert self.vocab is not None and self.net is not None, "fit first"
        kernels = sorted(set(kernel))
        pos = {k: j for j, k in enumerate(kernels)}
        ids = torch.as_tensor(pad([self.vocab.encode(tokens[k], self.cfg.max_len) for k in kernels]))
        self.net.eval()
        with torch.no_grad():
            out = self.net(ids, torch.as_tensor([pos[k] for k in kernel]), torch.as_tensor(size_features(size)))
        return out.numpy()


def grouped_cv_choices(tokens: dict[str, list[str]], kernel: np.ndarray, size: np.ndarray, perf: np.ndarray,
                       groups: np.ndarray, seed: int, cfg: SeqConfig | None = None, folds: int = 5
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold choices of the sequence model and of the fold's most common best shape, on the same
    repository-grouped folds as ``model.grouped_cv_choices`` for this seed."""
    import torch

    torch.set_num_threads(1)  # a shared host; results do not depend on it
    torch.use_deterministic_algorithms(True)
    choice = np.zeros(len(perf), dtype=int)
    common = np.zeros(len(perf), dtype=int)
    for train, test in group_folds(len(perf), groups, seed, folds):
        m = SequenceModel(cfg, seed).fit(tokens, kernel[train], size[train], perf[train])
        choice[test] = np.argmax(m.predict(tokens, kernel[test], size[test]), axis=1)
        common[test] = metric.most_common_best(perf[train])
    return choice, common
