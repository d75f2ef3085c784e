"""Stand-in worker processes for the local executor's event pipes (spawned, so importable)."""

import time


def stuck_mid_send(events):
    """Sends a message far larger than a pipe's buffer: with nobody reading, it blocks part-way."""
    events.send(("epoch", b"x" * (64 << 20)))


def report_then_idle(events, message):
    events.send(message)
    time.sleep(120)


def idle(events):
    time.sleep(120)


def report_forever(events, message):
    """A worker whose events never pause (fast epochs of a small model)."""
    while True:
        events.send(message)
        time.sleep(0.001)
