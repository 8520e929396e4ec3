"""paddle_like on Kubernetes: the PaddleLikeJob resource and its operator.

A ``PaddleLikeJob`` (group ``paddle-like.dev``, version ``v1``; its CRD is
``k8s/cluster/crd.yaml``) is one training job. The operator
(``python3 -m paddle_like.k8s.operator``, deployed by ``k8s/cluster``) turns each one
into the job's master, parameter servers and trainers, reads the job's progress from the
master's status page, stops the trainers once the master says the job is done and sets
the job's ``Succeeded`` or ``Failed`` condition (``kubectl wait`` waits on them).

    job_spec.py     the resource's fields, their defaults and checks (pure)
    job_objects.py  the child objects a job is made of (pure)
    job_tls.py      the job's certificates: cert-manager objects and Secret volumes (pure)
    job_status.py   the job's status from its master's page and its Pods (pure)
    operator.py     the control loop: API calls, status updates, command line
"""
