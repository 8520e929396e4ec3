"""Fashion-MNIST with a convolutional network written as an nn.Module subclass
(the two-conv-layer network of the TensorFlow tutorial, narrower by default).

    PYTHONPATH=build/python /usr/bin/python3 python/examples/cnn.py
    ... cnn.py --width 32 --train_limit 0 --epochs 5                # the full network, ~0.91
"""

import argparse
import os

import paddle_like as pl
from paddle_like import nn
from paddle_like.nn import functional as F


class ConvNet(nn.Module):
    def __init__(self, width=8, dropout=0.4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 5, padding="same")          # parameters "conv1.w", "conv1.b"
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(width, 2 * width, 5, padding="same")
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(2 * width * 7 * 7, 32 * width)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(32 * width, 10)

    def forward(self, x):                                              # x: (B, 1, 28, 28)
        h = self.pool1(F.relu(self.conv1(x)))                          # (B, w, 14, 14)
        h = self.pool2(F.relu(self.conv2(h)))                          # (B, 2w, 7, 7)
        h = self.drop(F.relu(self.fc1(self.flatten(h))))               # (B, 32w)
        return self.fc2(h)                                             # (B, 10)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(os.environ.get("PL_DATA_DIR", "build/data"), "fashion-mnist"))
    p.add_argument("--width", type=int, default=8, help="conv1 channels (the tutorial: 32)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train_limit", type=int, default=10000, help="first N training examples (0: all)")
    p.add_argument("--test_limit", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    pl.manual_seed(args.seed)
    train = pl.data.load_records(os.path.join(args.data, "train.plrec"), limit=args.train_limit or None)
    test = pl.data.load_records(os.path.join(args.data, "test.plrec"), limit=args.test_limit or None)
    model = ConvNet(args.width)
    print(model)
    print("parameters:", ", ".join(f"{n} {tuple(p.shape)}" for n, p in model.named_parameters()))
    opt = pl.optim.Adam(model.parameters(), lr=args.lr)
    pl.training.fit(model, nn.CrossEntropyLoss(), opt, train.features, train.labels, epochs=args.epochs,
                    batch_size=args.batch_size, seed=args.seed)
    print(f"final test accuracy: {pl.training.evaluate(model, test.features, test.labels):.4f}")


if __name__ == "__main__":
    main()
