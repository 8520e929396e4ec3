"""Fashion-MNIST with a multi-layer perceptron, in one process.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/mlp.py            # ~15 s
    ... mlp.py --epochs 10 --train_limit 0                                      # full run, ~0.88

Data: the prepared records (`make data`) in $PL_DATA_DIR/fashion-mnist or --data.
"""

import argparse
import os

import paddle_like as pl
from paddle_like import nn


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(os.environ.get("PL_DATA_DIR", "build/data"), "fashion-mnist"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train_limit", type=int, default=20000, help="first N training examples (0: all)")
    p.add_argument("--save", default="", help="write the trained model to this .safetensors file")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    pl.manual_seed(args.seed)
    train = pl.data.load_records(os.path.join(args.data, "train.plrec"), limit=args.train_limit or None)
    test = pl.data.load_records(os.path.join(args.data, "test.plrec"))
    model = nn.Sequential(nn.Flatten(),
                          nn.Linear(784, 512), nn.ReLU(),
                          nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    print(model)
    print(f"{model.num_parameters()} parameters; {len(train)} train / {len(test)} test examples")
    opt = pl.optim.Adam(model.parameters(), lr=args.lr)
    report = pl.training.fit(model, nn.CrossEntropyLoss(), opt, train.features, train.labels,
                             epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                             on_epoch_end=lambda e, loss: print(f"epoch {e + 1}: mean loss {loss:.4f}"))
    print(f"trained {report['steps']} steps in {report['seconds']:.1f}s ({report['samples_per_s']:.0f} samples/s)")
    if args.save:
        pl.save(model, args.save)
        print(f"saved to {args.save}")
    print(f"final test accuracy: {pl.training.evaluate(model, test.features, test.labels):.4f}")


if __name__ == "__main__":
    main()
