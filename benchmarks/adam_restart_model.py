"""How large Adam's steps are after its state restarts, by restart rule (issue 40).

A numpy model, not the pserver: 20,000 elements whose gradients have per-element means
and heterogeneous scales, a trained Adam (3,000 updates) as the reference, then 300
updates after a restart under each rule. Prints the mean |step| / lr over ranges of
updates, the share of steps above 2 lr and the largest.

- trained: the reference, no restart;
- zero_corrected: zero moments, bias-corrected from the restart (a restored shard before);
- warm: m uncorrected, v bias-corrected from the restart (paddle_like/optim/adam.cc);
- seeded: v seeded from the first g^2 and the job's step count kept, so no bias
  correction at all (rejected: elements whose first gradient was small overstep).

    /usr/bin/python3 benchmarks/adam_restart_model.py
"""
import numpy as np

N, T, TRAIN = 20000, 300, 3000
B1, B2, EPS = 0.9, 0.999, 1e-8


def main():
    rng = np.random.default_rng(0)
    scale = np.exp(rng.normal(0, 1.5, N))
    mean = scale * rng.normal(0, 0.3, N)

    def gradient():
        return mean + scale * rng.normal(0, 1, N)

    m, v = np.zeros(N), np.zeros(N)
    for _ in range(TRAIN):
        g = gradient()
        m, v = B1 * m + (1 - B1) * g, B2 * v + (1 - B2) * g * g
    trained = (m, v)

    def run(rule):
        m, v = (trained[0].copy(), trained[1].copy()) if rule == "trained" else (np.zeros(N), np.zeros(N))
        seeded = np.zeros(N, bool)
        steps = []
        for t in range(1, T + 1):
            g = gradient()
            m = B1 * m + (1 - B1) * g
            if rule == "seeded":
                v = np.where(seeded, B2 * v + (1 - B2) * g * g, g * g)
                seeded |= g != 0
                step = m / (np.sqrt(v) + EPS)
            else:
                v = B2 * v + (1 - B2) * g * g
                if rule == "trained":
                    step = m / (np.sqrt(v) + EPS)
                elif rule == "zero_corrected":
                    step = (m / (1 - B1 ** t)) / (np.sqrt(v / (1 - B2 ** t)) + EPS)
                else:  # warm
                    step = m / (np.sqrt(v / (1 - B2 ** t)) + EPS)
            steps.append(np.abs(step))
        return np.array(steps)

    for rule in ("trained", "zero_corrected", "warm", "seeded"):
        s = run(rule)
        print("%-15s mean |step|/lr: update 1 %.3f, 1-10 %.3f, 11-100 %.3f, 101-300 %.3f; "
              "above 2 lr %.4f; largest %.2f" % (rule, s[0].mean(), s[:10].mean(), s[10:100].mean(), s[100:].mean(),
                                                 (s > 2).mean(), s.max()))


if __name__ == "__main__":
    main()
