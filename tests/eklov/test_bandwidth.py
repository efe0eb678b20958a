"""The streaming co-runner: its rate limit, its report, its bad input."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from scalestack.errors import UserError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"),
                                reason="needs gcc and a sysfs cache description")


def test_rate_limited_streamer_reports_its_rate():
    from scalestack.eklov.bandwidth import Streamer, stream_bandwidth

    with Streamer(0, 400.0, 64 << 20) as s:
        pid = s.pid
        time.sleep(0.5)
    assert 300 < s.achieved_mb_s < 440, s.achieved_mb_s  # never ahead of its rate; may fall behind
    assert s.bytes_moved > 0 and s.elapsed_ns > 4e8
    assert not os.path.exists(f"/proc/{pid}/cmdline") or open(f"/proc/{pid}/stat").read().split(") ")[-1][0] == "Z"
    assert stream_bandwidth(0.3, 0, size_bytes=64 << 20) > 400  # unlimited streams faster than that


def test_streamer_bad_input():
    from scalestack.eklov.bandwidth import Streamer

    with pytest.raises(UserError, match="negative"):
        Streamer(0, -1.0)
    with pytest.raises(UserError, match="failed to start"), Streamer(0, 0.0, 1024):
        pass
