"""Click-through-rate prediction: a sparse embedding table (rows created on first use,
updated lazily) plus an MLP, on a synthetic click log drawn from a known logistic model,
so the test AUC can be compared with the best achievable.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/ctr.py
    ... ctr.py --data build/data/clicks        # records from `build/bin/pl-gen-clicks --out ...`
"""

import argparse
import os
import tempfile

import numpy as np

import paddle_like as pl
from paddle_like import nn
from paddle_like.nn import functional as F


class CtrNet(nn.Module):
    def __init__(self, fields, dim=8, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(0, dim)        # "emb.table": any non-negative id (hashed features)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(fields * dim, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, ids):                    # ids: int64 (B, F)
        h = self.flatten(self.emb(ids))        # (B, F * dim)
        return self.fc2(F.relu(self.fc1(h)))   # (B, 1) logits


def synthetic_clicks(directory, n_train, n_test, fields=8, vocab=500, seed=1):
    """Writes train.plrec / test.plrec: ids of field f are Zipf-distributed over
    [f*vocab, (f+1)*vocab); P(click) = sigmoid(-1 + sum of true per-id weights)."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(scale=0.8, size=fields * vocab)
    ranks = np.arange(1, vocab + 1)
    zipf = ranks ** -1.1 / np.sum(ranks ** -1.1)
    for name, n in (("train", n_train), ("test", n_test)):
        ids = rng.choice(vocab, size=(n, fields), p=zipf) + np.arange(fields) * vocab
        prob = 1.0 / (1.0 + np.exp(-(-1.0 + weights[ids].sum(axis=1))))
        labels = (rng.random(n) < prob).astype(np.float32)
        pl.data.write_records(os.path.join(directory, f"{name}.plrec"), labels, ids=ids, probabilities=prob)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="", help="directory with train.plrec/test.plrec click logs "
                                              "(default: generate a small one)")
    p.add_argument("--num_train", type=int, default=100000)
    p.add_argument("--num_test", type=int, default=20000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if not data:
            data = tmp
            synthetic_clicks(tmp, args.num_train, args.num_test, seed=args.seed)
        train = pl.data.load_records(os.path.join(data, "train.plrec"), kind="clicks")
        test = pl.data.load_records(os.path.join(data, "test.plrec"), kind="clicks")
    pl.manual_seed(args.seed)
    model = CtrNet(fields=train.ids.shape[1])
    print(model)
    opt = pl.optim.Adagrad(model.parameters(), lr=args.lr)
    pl.training.fit(model, nn.BCEWithLogitsLoss(), opt, train.ids, train.labels, epochs=args.epochs,
                    batch_size=args.batch_size, seed=args.seed)
    table = model.get_parameter("emb.table")
    print(f"embedding rows created: {table.num_held_rows}")
    auc = pl.training.evaluate(model, test.ids, test.labels, metric="auc")
    ideal = pl.metrics.auc(test.probabilities, test.labels)
    print(f"final test auc: {auc:.4f}  (the generating model's own: {ideal:.4f})")


if __name__ == "__main__":
    main()
