"""Softmax regression on Fashion-MNIST written in NumPy, trained by a distributed job
through the key-value API (paddle_like.kv): no nn.Module, the model is two keys.

    python -m paddle_like.launch --pservers 2 --trainers 2 \\
        --data build/data/fashion-mnist/train.plrec \\
        python/examples/kv_softmax.py --test build/data/fashion-mnist/test.plrec

Each trainer leases tasks from the master, and per batch computes the gradients of the
values it holds, then push_pulls them: one call that sends the gradients and brings
back values that include them. The pservers run SGD.
"""

import argparse
import os

import numpy as np

import paddle_like as pl


def gradients(w, b, x, y):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return {"w": x.T @ p, "b": p.sum(axis=0)}, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", help="test records (.plrec): final accuracy")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--wire_dtype", default="float32", help="float32 or bfloat16 (dense keys over gRPC)")
    ap.add_argument("--no_shared_memory", action="store_true",
                    help="gRPC even to pservers on this host (as between machines)")
    args = ap.parse_args()

    name = f"trainer-{os.environ.get('PL_TRAINER_RANK', '0')}"
    pl.log.set_process_name(name)
    pl.log.info(f"transport: {pl.distributed.configure_transport()}")  # PL_TLS_DIR from pl-launch
    master = pl.distributed.MasterClient(os.environ["PL_MASTER_ADDR"], name)
    reg = master.register()
    kv = pl.kv.KVWorker([("w", (784, 10)), ("b", (10,))], optimizer="sgd", lr=args.lr,
                        num_pservers=reg["num_pservers"], wire_dtype=args.wire_dtype,
                        shared_memory=not args.no_shared_memory)
    kv.connect()
    values = kv.wait(kv.pull(["w", "b"]))
    steps = [0]

    def train_task(task):
        data = task.load("image")
        x = data["features"].reshape(len(data["labels"]), -1)
        y = data["labels"].astype(np.int64)
        order = np.random.default_rng([task.id, task.pass_]).permutation(len(y))
        for s in range(0, len(order), args.batch_size):
            idx = order[s:s + args.batch_size]
            grads, _ = gradients(values["w"], values["b"], x[idx], y[idx])
            values.update(kv.wait(kv.push_pull(grads, num_samples=len(idx))))
            steps[0] += 1
        return ("trained", len(y))

    loop = master.run_task_loop(train_task, log=pl.log.info)
    pl.log.info(f"{'job done' if loop['job_done'] else 'stopped'} after {loop['tasks_done']} tasks, "
                f"{steps[0]} steps; {kv.counters()['bytes_pushed']} bytes pushed")
    if loop["job_done"] and args.test:
        values = kv.wait(kv.pull(["w", "b"]))
        test = pl.data.load_records(args.test)
        x = test.features.reshape(len(test), -1)
        accuracy = float(((x @ values["w"] + values["b"]).argmax(axis=1) == test.labels).mean())
        print(f"final test accuracy: {accuracy:.4f}", flush=True)
    master.leave()


if __name__ == "__main__":
    main()
