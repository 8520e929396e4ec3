"""python -m paddle_like.cuda: which GPUs and CUDA libraries this process finds, and why
not; exits 0 when a GPU can be used, 1 otherwise."""

import sys

from . import main

sys.exit(main())
