"""Your own model, dataset and loop, trained by a distributed job.

    python -m paddle_like.launch --pservers 2 --trainers 2 --data indices:60000 --passes 2 \\
        python/examples/own_loop.py

The master cuts the job into tasks of sample indices (--data indices:N, N = the
dataset's size); every trainer runs this script: it joins the job
(pl.distributed.init()), wraps its model (ParameterServerModel: the parameters live on
the pservers, which run Adam on a warmed-up cosine schedule), and trains with a loop of
its own — here a residual MLP defined below, a Dataset that reads Fashion-MNIST's IDX
files with NumPy (not the framework's records), a loss with a logit penalty and
gradient clipping. SIGTERM gives the current task back and exits 0.
"""

import argparse
import gzip
import os
import sys

import numpy as np

import paddle_like as pl
from paddle_like import nn


class FashionMNIST:
    """A map-style dataset over the IDX files of the Debian package dataset-fashion-mnist:
    dataset[indices] -> (images float32 (B, 784) in [0, 1], labels int64 (B,))."""

    def __init__(self, directory, train=True, limit=None):
        prefix = "train" if train else "t10k"
        with gzip.open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
        with gzip.open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        n = len(labels) if not limit else min(limit, len(labels))
        self.images = (images[:n].astype(np.float32) / 255.0)
        self.labels = labels[:n].astype(np.int64)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class ResidualMLP(nn.Module):
    def __init__(self, hidden=128, blocks=2):
        super().__init__()
        self.inp = nn.Linear(784, hidden)
        self.blocks = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(blocks)])
        self.out = nn.Linear(hidden, 10)

    def forward(self, x):
        h = nn.functional.relu(self.inp(x))
        for block in self.blocks:
            h = h + nn.functional.relu(block(h))
        return self.out(h)


def penalized_cross_entropy(logits, labels, penalty=1e-3):
    return nn.functional.cross_entropy(logits, labels) + (logits * logits).mean() * penalty


def accuracy(model, dataset, batch=1000):
    correct = 0
    with pl.no_grad():
        for s in range(0, len(dataset), batch):
            x, y = dataset[np.arange(s, min(s + batch, len(dataset)))]
            correct += int((model(x).numpy().argmax(axis=1) == y).sum())
    return correct / len(dataset)


def main(argv=None, on_step=None):
    """on_step(step) (optional) runs after each step: tests use it to preempt a trainer."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--idx_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train_limit", type=int, default=0, help="the first N training images (0: all)")
    p.add_argument("--test_limit", type=int, default=0)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=5.0, help="clip the gradients' total norm to this")
    p.add_argument("--warmup_steps", type=int, default=10, help="the learning rate's linear warm-up, in updates")
    args = p.parse_args(argv)

    train = FashionMNIST(args.idx_dir, train=True, limit=args.train_limit)
    job = pl.distributed.init()
    net = ResidualMLP()
    # The pservers anneal the rate over the job's updates (one per batch of any trainer).
    updates = -(-len(train) // args.batch_size) * job.client.job_status()["num_passes"]
    schedule = pl.optim.lr_scheduler.CosineAnnealingLR(pl.optim.spec("adam", lr=args.lr), T_max=updates,
                                                       eta_min=args.lr / 20, warmup_steps=args.warmup_steps,
                                                       warmup_factor=0.1)
    model = pl.distributed.ParameterServerModel(net, optimizer=schedule)
    steps = 0
    with job:
        for task in job.tasks():
            for x, y in task.batches(args.batch_size, dataset=train):
                loss = penalized_cross_entropy(model(x), y)
                loss.backward()
                pl.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                model.step()
                steps += 1
                if on_step is not None:
                    on_step(steps)
    result = job.result
    print(f"result: {'job done' if result['job_done'] else 'stopped'} after {result['tasks_done']} tasks, "
          f"{steps} steps", flush=True)
    if result["job_done"]:
        model.pull()  # the job's final parameters
        test = FashionMNIST(args.idx_dir, train=False, limit=args.test_limit)
        print(f"final test accuracy: {accuracy(model, test):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
