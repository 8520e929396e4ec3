"""Distributed training from Python. The same script runs

  * as a trainer of a job started by the launcher (it reads PL_MASTER_ADDR & co.):
      python -m paddle_like.launch --pservers 2 --trainers 2 \\
          --data build/data/fashion-mnist/train.plrec \\
          python/examples/distributed.py --test build/data/fashion-mnist/test.plrec
    (or: build/bin/pl-launch --pservers 2 --trainers 2 --data ... -- /usr/bin/python3 python/examples/distributed.py ...)
  * alone, training in this process on --data DIR (train.plrec, test.plrec).

Each trainer leases tasks from the master, pulls the parameters from the pservers,
computes gradients here and pushes them; the pservers run Adam. SIGTERM makes a
trainer return its task and exit 0.
"""

import argparse
import os
import sys

import paddle_like as pl
from paddle_like import nn


class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(nn.functional.relu(self.fc1(self.flatten(x))))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--seed", type=int, default=1, help="the same on every trainer")
    p.add_argument("--test", default="", help="test record file, evaluated when the job is done")
    p.add_argument("--test_limit", type=int, default=None)
    p.add_argument("--save", default=None, help="write the job's final parameters here (.safetensors)")
    p.add_argument("--local_steps", type=int, default=1,
                   help="optimizer steps on this trainer's copy between exchanges (1: every step's gradients)")
    p.add_argument("--data", default=os.path.join(os.environ.get("PL_DATA_DIR", "build/data"), "fashion-mnist"),
                   help="local mode: directory with train.plrec and test.plrec")
    p.add_argument("--epochs", type=int, default=1, help="local mode")
    p.add_argument("--train_limit", type=int, default=10000, help="local mode (0: all)")
    args = p.parse_args()

    model = MLP(args.hidden)
    model.init_parameters(args.seed)
    loss_fn = nn.CrossEntropyLoss()

    if pl.distributed.is_available():
        pl.distributed.train(model, loss_fn, optimizer=pl.optim.spec("adam", lr=args.lr),
                                      batch_size=args.batch_size, test=args.test or None,
                                      test_limit=args.test_limit, seed=args.seed, progress=False,
                                      save=args.save, local_steps=args.local_steps)
        return 0  # the final accuracy was logged ("final test accuracy: ...")   # also after SIGTERM: the task went back to the master

    # No master: train in this process.
    train = pl.data.load_records(os.path.join(args.data, "train.plrec"), limit=args.train_limit or None)
    test = pl.data.load_records(args.test or os.path.join(args.data, "test.plrec"), limit=args.test_limit)
    opt = pl.optim.Adam(model.parameters(), lr=args.lr)
    pl.training.fit(model, loss_fn, opt, train.features, train.labels, epochs=args.epochs,
                    batch_size=args.batch_size, seed=args.seed)
    print(f"final test accuracy: {pl.training.evaluate(model, test.features, test.labels):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
