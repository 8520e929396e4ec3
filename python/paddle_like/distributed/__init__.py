"""Training as a trainer of a distributed job (a master, parameter servers, trainers),
from a script that pl-launch (``python -m paddle_like.launch``) or Kubernetes starts.

Two ways:

* your own loop — init(), job.tasks() as the data source, ParameterServerModel around
  your model (job.py, ps_model.py; example: python/examples/own_loop.py);
* the built-in loop — train(model, loss_fn, ...) over image or click records
  (trainer.py; example: python/examples/distributed.py).

Both read the launcher's environment (environment.py) and keep the same exactly-once
accounting and SIGTERM behaviour as the C++ trainer.
"""

from .environment import MasterClient, configure_transport, is_available
from .job import Job, LeasedTask, current, init
from .ps_model import ParameterServerModel
from .trainer import DistResult, DistributedTrainer, train

__all__ = ["is_available", "configure_transport", "MasterClient", "init", "current", "Job", "LeasedTask",
           "ParameterServerModel", "DistResult", "DistributedTrainer", "train"]
