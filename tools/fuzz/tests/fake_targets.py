"""Worker functions with planted failures, for the runner's tests (runner.py's protocol:
``function(payload, stage)``)."""
import os
import signal
import time


def echo(payload, stage):
    stage("echo")
    return payload


def segfault(payload, stage):
    stage("about to crash")
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(payload, stage):
    stage("about to hang")
    while True:
        time.sleep(0.05)
