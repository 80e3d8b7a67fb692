"""Pipeline parallelism, framework-neutral: schedules as data (GPipe, 1F1B), their simulated
timeline (bubble fraction, peak in-flight activations) and an executor that runs a schedule's
actions on stages placed on groups of devices. Frameworks supply the stages
(frameworks/torch/pipelining.py, frameworks/jax/pipelining.py); see pjrt/README.md."""
from pjrt.pipelining.executor import PipelineRun, PipelineStage, copy_to_devices, run_schedule
from pjrt.pipelining.schedules import (SCHEDULES, Action, B, F, Kind, PipelineError, Schedule,
                                       make_schedule, validate)
from pjrt.pipelining.timeline import TimedAction, Timeline, simulate

__all__ = [
    "Action", "B", "F", "Kind", "PipelineError", "PipelineRun", "PipelineStage", "SCHEDULES",
    "Schedule", "TimedAction", "Timeline", "copy_to_devices", "make_schedule", "run_schedule",
    "simulate", "validate",
]
