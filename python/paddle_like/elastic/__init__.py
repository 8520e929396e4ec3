"""Elastic jobs: the decision procedure that sizes them, shared with pl-autoscale.

``ElasticPolicy`` is the C++ policy of ``paddle_like/elastic/elastic_policy.h``: jobs
are admitted at their minimum in priority then arrival order, spare slots are shared by
how far each job is from its maximum, slots the capacity no longer covers are reclaimed
in the same decision, and growth waits out hysteresis and a per-job cooldown::

    from paddle_like import elastic
    policy = elastic.ElasticPolicy(cooldown_ms=5000, settle_ms=1000)
    policy.add_job("ctr", min_trainers=1, max_trainers=8)
    policy.set_capacity(6)
    plan = policy.decide(now_ms)          # plan.jobs[i].target, .reason, .share
    print(plan.summary())

``paddle_like.elastic.kube_driver`` drives it against a Kubernetes cluster.
"""
from paddle_like._C.elastic import ElasticPolicy, JobDecision, Plan

__all__ = ["ElasticPolicy", "JobDecision", "Plan"]
