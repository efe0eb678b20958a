"""report.html of a real recording, opened in headless Chromium (Playwright driving /usr/bin/chromium):
no console error, one timeline lane per thread, drawn; wheel zoom and drag change the visible range;
hovering shows an interval; a wait's waker is reachable. Fails when the timeline is missing or empty."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import scalestack
from scalestack.report import ReportOptions, build_report, timeline, write_report
from scalestack.report.browser import browser_page, open_report, why_not
from scalestack.trace import State

from ..conftest import can_record

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(can_record() is not None, reason=str(can_record())),
              pytest.mark.skipif(why_not() is not None, reason=str(why_not()))]

# three workers hand a token round a condition variable (futex waits, each ended by a known waker),
# worker 0 computes three times as long per turn as the others
PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn = 0;
static volatile double sink;
static void work(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }
static void *worker(void *arg) {
    long me = (long)arg;
    for (int round = 0; round < 40; round++) {
        pthread_mutex_lock(&m);
        while (turn % 3 != me) pthread_cond_wait(&c, &m);
        pthread_mutex_unlock(&m);
        work(me == 0 ? 600000 : 200000);
        pthread_mutex_lock(&m);
        turn++;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}
int main(void) {
    pthread_t t[3];
    for (long k = 0; k < 3; k++) pthread_create(&t[k], NULL, worker, (void *)k);
    for (int k = 0; k < 3; k++) pthread_join(t[k], NULL);
    printf("%d\n", turn);
    return 0;
}
"""


@pytest.fixture(scope="module")
def recorded_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    (d / "token.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-pthread", str(d / "token.c"), "-o", str(d / "token")], check=True)
    trace = scalestack.record([str(d / "token")], str(d / "token.trace"))
    trace.validate()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timeline, "PACK_BLOCK", 1000)  # the page's data in many blocks, as a big trace's are
        report = build_report(trace, ReportOptions(window="5ms"))
    written = write_report(report, str(d / "report"))
    return trace, report, written["report.html"]


@pytest.fixture(scope="module")
def page(recorded_report):
    _, _, path = recorded_report
    with browser_page(1280, 900) as (pg, errors):
        info = open_report(pg, path)
        yield pg, errors, info


def test_timeline_draws_a_lane_per_thread_without_errors(recorded_report, page):
    trace, report, _ = recorded_report
    pg, errors, info = page
    assert pg.locator("#sst-tl").count() == 1, "the timeline is missing from report.html"
    assert info["error"] is None and errors == []
    n = len(trace.threads)
    assert n == 4  # main and three workers
    assert info["lanes"] == n and int(pg.locator("#sst-tl").get_attribute("data-lanes")) == n
    assert info["drawnLanes"] == n  # all four fit in the view: each was drawn
    assert info["intervals"] == len(trace.states)
    # the canvas holds state colours, not just the background: count its coloured pixels in the lanes
    coloured = pg.evaluate("""() => { const c = document.querySelector('.sst-canvas'), x = c.getContext('2d');
        const d = x.getImageData(Math.round(190 * devicePixelRatio), Math.round(44 * devicePixelRatio),
                                 c.width - Math.round(190 * devicePixelRatio), c.height - Math.round(44 * devicePixelRatio)).data;
        let k = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) k++;
        return k; }""")
    assert coloured > 2000
    assert info["painted"] > 100
    lanes = [ln["tid"] for ln in report.timeline["summary"]["lanes"]]
    assert lanes[0] == trace.meta["root_tid"]  # main first, then its pool of workers


def test_wheel_zoom_and_drag_change_the_visible_range(page):
    pg, errors, _ = page
    pg.evaluate("() => window.scalestackTimeline.reset()")
    canvas = pg.locator(".sst-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    before = pg.evaluate("() => window.scalestackTimeline.visibleRange()")
    pg.mouse.move(box["x"] + 190 + (box["width"] - 190) * 0.5, box["y"] + 70)
    for _ in range(5):
        pg.mouse.wheel(0, -200)  # zoom in at the pointer
    pg.wait_for_timeout(100)
    after = pg.evaluate("() => window.scalestackTimeline.visibleRange()")
    assert after[1] - after[0] < 0.5 * (before[1] - before[0])
    assert before[0] <= after[0] < after[1] <= before[1]
    x, y = box["x"] + 600, box["y"] + 70
    pg.mouse.move(x, y)
    pg.mouse.down()
    pg.mouse.move(x - 200, y, steps=4)  # drag left: later times come into view
    pg.mouse.up()
    pg.wait_for_timeout(50)
    panned = pg.evaluate("() => window.scalestackTimeline.visibleRange()")
    assert panned[0] > after[0] and panned[1] - panned[0] == pytest.approx(after[1] - after[0])
    # to the µs: a 1 µs view is allowed and draws
    pg.evaluate("() => window.scalestackTimeline.setRange(1e6, 1e6 + 1000)")
    r = pg.evaluate("() => window.scalestackTimeline.visibleRange()")
    assert r[1] - r[0] == pytest.approx(1000)
    assert errors == []


def test_hover_shows_the_interval_and_a_wait_leads_to_its_waker(recorded_report, page):
    trace, report, _ = recorded_report
    pg, errors, _ = page
    lanes = [ln["tid"] for ln in report.timeline["summary"]["lanes"]]
    s = trace.states
    waits = np.flatnonzero((s.state == State.SYNC_WAIT) & np.isin(s.waker, trace.threads.tid) & (s.waker != s.tid))
    assert len(waits), "the token ring must show futex waits ended by another thread"
    i = int(waits[np.argmax(s.end_ns[waits] - s.start_ns[waits])])
    lane, t = lanes.index(int(s.tid[i])), (int(s.start_ns[i]) + int(s.end_ns[i])) / 2 - trace.start_ns
    got = pg.evaluate("([l, t]) => window.scalestackTimeline.intervalAt(l, t)", [lane, t])
    assert got["state"] == "sync_wait" and got["waker"] == int(s.waker[i]) and got["object"].startswith("0x")
    # zoom onto the wait, hover it, click it
    a, b = int(s.start_ns[i]) - trace.start_ns, int(s.end_ns[i]) - trace.start_ns
    pg.evaluate("([a, b]) => window.scalestackTimeline.setRange(a - (b - a), b + (b - a))", [a, b])
    canvas = pg.locator(".sst-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    y = pg.evaluate("(l) => { const t = window.scalestackTimeline; return t.laneTop(l); }", lane) + 7
    x = box["x"] + 190 + (box["width"] - 190) * 0.5
    pg.mouse.move(x, box["y"] + y)
    tip = pg.locator(".sst-tip")
    assert tip.is_visible() and "sync wait" in tip.inner_text() and "woken by" in tip.inner_text()
    pg.mouse.click(x, box["y"] + y)
    arrow = pg.evaluate("() => window.scalestackTimeline.arrow()")
    assert arrow["from"] == lanes.index(int(s.waker[i])) and arrow["to"] == lane
    assert arrow["t"] == pytest.approx(b)
    assert errors == []


def test_windows_are_selectable(page):
    pg, errors, _ = page
    options = pg.locator(".sst-sel option").all_inner_texts()
    assert options[0] == "whole run" and any(o.startswith("window 2:") for o in options)
    pg.select_option(".sst-sel", "w1")
    r = pg.evaluate("() => window.scalestackTimeline.visibleRange()")
    assert r == pytest.approx([5e6, 10e6])
    assert errors == []
