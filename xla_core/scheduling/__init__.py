"""Latency-hiding scheduling of per-device programs with asynchronous collectives.

* ``estimator``: ``LatencyEstimator`` (``op_seconds``, ``collective_seconds``), the cost
  model's ``CostModelEstimator`` and ``MeasuredEstimator`` (a profile's times over it);
* ``timeline``: the simulated execution of one block's order (compute thread and
  communication thread);
* ``scheduler``: the ``latency-hiding-scheduler`` pass (``schedule_module`` with a given
  estimator);
* ``report``: ``schedule_report`` (``openhlo opt --schedule-report``).
"""
from xla_core.scheduling.estimator import (CostModelEstimator, LatencyEstimator,
                                           MeasuredEstimator, SchedulingError)
from xla_core.scheduling.report import schedule_report
from xla_core.scheduling.scheduler import LatencyHidingSchedulerPass, schedule_module
from xla_core.scheduling.timeline import simulate

__all__ = ["CostModelEstimator", "LatencyEstimator", "LatencyHidingSchedulerPass",
           "MeasuredEstimator", "SchedulingError", "schedule_module", "schedule_report",
           "simulate"]
