"""What serve's background graph build keeps goes out of the garbage collector's way as it is built."""

import gc

from memstrata.harness.cli.serve import background_pause


def test_the_build_gives_way_then_freezes_what_it_made():
    calls = []
    gate: list = []
    pause = background_pause(gate)
    try:
        kept = [[i] for i in range(1000)]      # what a step of the build keeps (containers)
        before = gc.get_freeze_count()
        pause()                                # no gate yet (the proxy is not built): freezes only
        assert gc.get_freeze_count() >= before + len(kept)
        gate.append(lambda: calls.append(gc.get_freeze_count()))
        more = [[i] for i in range(1000)]
        pause()
        assert calls and calls[0] < gc.get_freeze_count()   # it gave way first, then froze
        assert gc.get_freeze_count() >= calls[0] + len(more)
    finally:
        gc.unfreeze()
