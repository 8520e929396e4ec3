"""Datasets in the project's record files (chunk-indexed, checksummed; see
paddle_like/data/record_file.h), decoded by the C++ reader, and a batch iterator.

    train = paddle_like.data.load_records("build/data/fashion-mnist/train.plrec")
    train.features    # float32 (N, 1, 28, 28) in [0, 1]   (images)
    train.labels      # int64 (N)
    for x, y in paddle_like.data.DataLoader(train.features, train.labels, batch_size=64):
        ...

The arrays returned are read-write NumPy views of the C++ buffers (no copy), valid
for as long as you hold them.
"""

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _C

__all__ = ["Records", "load_records", "write_records", "DataLoader"]


@dataclass
class Records:
    """A decoded dataset.

    kind "image": features float32 (N, C, H, W) in [0, 1], labels int64 (N).
    kind "clicks": ids int64 (N, F), labels float32 (N) 0/1, probabilities float32 (N)
    (the generator's P(click)), features float32 (N, D) when the samples carry dense
    values, else None.
    """
    kind: str
    features: Optional[np.ndarray]
    ids: Optional[np.ndarray]
    labels: np.ndarray
    probabilities: Optional[np.ndarray]

    def __len__(self):
        return len(self.labels)

    @property
    def inputs(self):
        """What a model takes: the images, or the ids of a click log."""
        return self.features if self.kind == "image" else self.ids

    def subset(self, n):
        """The first n examples (views)."""
        cut = lambda a: None if a is None else a[:n]
        return Records(self.kind, cut(self.features), cut(self.ids), self.labels[:n], cut(self.probabilities))


def load_records(path, kind="auto", limit=None):
    """Decodes a record file, or every "*.plrec" file of a directory (GIL released).

    kind: "image", "clicks" or "auto" (images when the samples have pixels).
    limit: keep only the first `limit` examples. FileNotFoundError when `path` is
    missing, OSError when a file is corrupt, ValueError when samples disagree.
    """
    path = os.fspath(path)
    if kind == "auto":
        d = _C.load_records(path, "image")
        if d["features"] is None or d["features"].size == 0 and len(d["labels"]) > 0:
            d = _C.load_records(path, "clicks")
    elif kind in ("image", "clicks"):
        d = _C.load_records(path, kind)
    else:
        raise ValueError(f"load_records: kind must be 'auto', 'image' or 'clicks', got {kind!r}")
    r = Records(d["kind"], d["features"], d["ids"], d["labels"], d["probabilities"])
    if limit is not None:
        if limit < 0:
            raise ValueError(f"load_records: limit must be >= 0, got {limit}")
        r = r.subset(int(limit))
    return r


def write_records(path, labels, *, images=None, ids=None, probabilities=None, records_per_chunk=1000):
    """Writes a record file and its chunk index (atomically), readable by
    load_records, pl-trainer and the master.

    images: (N, C, H, W) or (N, H, W), uint8 or float in [0, 1]; labels int64 (N).
    ids: int64 (N, F) sparse ids of a click log; labels 0/1 (N); probabilities optional.
    """
    path = os.fspath(path)
    if (images is None) == (ids is None):
        raise ValueError("write_records: give exactly one of images= or ids=")
    if images is not None:
        images = np.asarray(images)
        if images.ndim == 3:
            images = images[:, None]
        if images.ndim != 4:
            raise ValueError(f"write_records: images must be (N, C, H, W) or (N, H, W), got {images.shape}")
        if images.dtype != np.uint8:
            if images.dtype.kind != "f":
                raise TypeError(f"write_records: images must be uint8 or float in [0, 1], got {images.dtype}")
            images = np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)
        labels = np.asarray(labels)
        if labels.dtype.kind not in "iu":
            raise TypeError(f"write_records: image labels must be integers, got {labels.dtype}")
        _C.write_image_records(path, np.ascontiguousarray(images), labels.astype(np.int64),
                               int(records_per_chunk))
    else:
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"write_records: ids must be integers, got {ids.dtype}")
        probs = None if probabilities is None else np.asarray(probabilities, dtype=np.float32)
        _C.write_click_records(path, ids.astype(np.int64), np.asarray(labels, dtype=np.float32), probs,
                               int(records_per_chunk))


class DataLoader:
    """Batches of (inputs, labels) NumPy arrays; each pass visits every example once,
    in an order drawn from (seed, pass) when shuffling. Batches are fresh contiguous
    copies, so paddle_like wraps them without another copy."""

    def __init__(self, inputs, labels, batch_size=64, shuffle=True, seed=0, drop_last=False):
        if len(inputs) != len(labels):
            raise ValueError(f"DataLoader: {len(inputs)} inputs but {len(labels)} labels")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        self.inputs, self.labels = inputs, labels
        self.batch_size, self.shuffle, self.seed, self.drop_last = int(batch_size), shuffle, seed, drop_last
        self.epoch = 0

    def __len__(self):
        n = len(self.labels)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.labels)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(n)
        else:
            order = np.arange(n)
        self.epoch += 1
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            yield self.inputs[idx], self.labels[idx]
