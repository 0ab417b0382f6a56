"""The run's progress: the time left comes from the cost model's work left, corrected by
what the finished cells took (:class:`kngflow.sweep.quiet.WorkLeft`), not from the cells
per second, which overstated a short run's time left up to 25-fold as its first cells
finished (largest n first; each worker's first releases load its kernels).  The negative
controls: the cells per second's time left; a median taken with the first blocks."""

from __future__ import annotations

import io

import pytest

from kngflow.sweep import quiet


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(quiet.time, "monotonic", c)
    return c


def test_plain_lines_say_the_time_left_from_the_work_left(clock):
    """100 cells, 100 s of estimated work on 2 threads: 50 s left at the start (the plan's
    estimate); the first blocks (each thread's first, left out of the ratio) and one more,
    10 cells and 25 s of the work in all, whose releases took half their estimate:
    0.5 · 75 / 2 ≈ 19 s left, where the cells per second say 90 s."""
    out, work = io.StringIO(), quiet.WorkLeft(100.0, threads=2)
    bar = quiet.progress_bar(100, stream=out, interval=30.0, work=work)
    clock.now += 10
    for ratio in (40.0, 30.0, 0.5):
        work.add(25.0 / 3, ratio=ratio)
    bar.update(10)  # the first finished cells are written at once
    bar.set_postfix(failed=2)
    clock.now += 5
    work.add(5.0, ratio=0.5)
    bar.update(10)  # within the interval: not written
    clock.now += 25
    work.add(5.0, ratio=0.5)
    bar.update(10)
    bar.n = 100  # as the run sets it from the store before it closes the bar
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "cells: 0/100 (0.0%), about 50 s left, 0 s elapsed"
    assert lines[1] == "cells: 10/100 (10.0%), 1 cells/s, about 19 s left, 10 s elapsed"
    assert lines[2] == "cells: 30/100 (30.0%), 0.75 cells/s, about 16 s left, 40 s elapsed, failed 2"  # 0.5 · 65 / 2
    assert len(lines) == 4 and "left" not in lines[3]
    # negative control: without the work, the cells per second say 90 s ("2 min")
    out = io.StringIO()
    bar = quiet.progress_bar(100, stream=out, interval=30.0)
    clock.now += 10
    bar.update(10)
    assert out.getvalue().splitlines()[1] == "cells: 10/100 (10.0%), 1 cells/s, about 2 min left, 10 s elapsed"


def test_the_ratio_is_a_median_without_each_threads_first_block():
    work = quiet.WorkLeft(100.0, threads=1)
    assert work.seconds() == 100.0  # no block yet: the estimate itself
    work.add(10.0, 300.0)  # the thread's first block: its worker loads its kernels
    assert work.seconds() == 90.0
    for ratio in (20.0, 1.0, 1.2, None, float("nan")):  # a slow block among the others
        work.add(10.0, ratio)
    assert work.seconds() == pytest.approx(1.2 * 40.0)
    work.threads = 4  # workers joined
    assert work.seconds() == pytest.approx(1.2 * 40.0 / 4)


def test_the_terminal_bar_says_the_time_left_from_the_work_left(clock):
    term, work = Terminal(), quiet.WorkLeft(100.0, threads=2)
    bar = quiet.progress_bar(100, stream=term, work=work)
    clock.now += 10
    for ratio in (40.0, 30.0, 0.5):
        work.add(25.0 / 3, ratio=ratio)
    bar.set_postfix(failed=1, refresh=False)
    bar.update(10)
    bar.refresh()
    shown = term.getvalue().rsplit("\r", 1)[-1]
    assert "10/100" in shown and "about 19 s left, failed 1" in shown and "<" not in shown, shown
    bar.update(90)
    bar.close()
    assert "left" not in term.getvalue().rsplit("\r", 1)[-1]
