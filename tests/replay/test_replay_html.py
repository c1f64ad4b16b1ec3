"""`kopfsched replay -o html` in a real headless Chromium: the example cluster's replay opens
with no script error and no network request, shows the JSON's figures, a chart per resource
with hover values, the final nodes; --compare shows both runs on one time axis."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest

from kopfsched.cli import main
from kopfsched.plugins.registry import full_registry
from kopfsched.simulate.history import build
from kopfsched.simulate.html import replay_html, replay_view
from kopfsched.simulate.loader import load_files
from kopfsched.simulate.replay import replay
from kopfsched.simulate.replay_output import compare_json, to_json
from kopfsched.simulate.runner import build_profiles
from tests.browser import OpenedFile, sync_page

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
CLUSTER = str(EXAMPLES / "cluster.yaml")
TRACE = str(EXAMPLES / "replay-trace.csv")
PACKED = str(EXAMPLES / "profiles" / "packed-default.yaml")


def render(compare: bool) -> tuple[dict[str, Any], str]:
    """(the JSON, the page) of the example's replay, from one run each (the CLI's own path)."""
    hist = build(load_files([CLUSTER]), [TRACE])
    registry = full_registry()
    runs = [asyncio.run(replay(hist, registry=registry))]
    if compare:
        overrides = [p for p in build_profiles(load_files([PACKED]), registry) if p.source != "default"]
        runs.append(asyncio.run(replay(hist, registry=registry, overrides=overrides)))
    reports = [to_json(run) for run in runs]
    labels = ["before", "after"] if compare else [""]
    page = replay_html([(label, rep, replay_view(run.sim, run.resources))
                        for label, rep, run in zip(labels, reports, runs, strict=True)])
    return (compare_json(*reports) if compare else reports[0]), page


@pytest.fixture(scope="module")
def single() -> tuple[dict[str, Any], str]:
    return render(False)


@pytest.fixture(scope="module")
def compared() -> tuple[dict[str, Any], str]:
    return render(True)


def test_the_command_writes_the_page(tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
                                         "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n")
    (tmp_path / "trace.csv").write_text("name,arrival,duration,cpu\na,0,10,1\n")
    assert main(["replay", "nodes.yaml", "trace.csv", "-o", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!doctype html>") and '"kind":"replay"' in page


def chip_values(raw: Any) -> dict[str, str]:
    """{label: value} of the header's chips (a chip is <b>value</b>label)."""
    return raw.evaluate("""() => Object.fromEntries([...document.querySelectorAll('header .chip')].map(
        (c) => [c.textContent.slice(c.querySelector('b').textContent.length), c.querySelector('b').textContent]))""")


def test_replay_report_shows_the_runs_figures(single: tuple[dict[str, Any], str], tmp_path: pathlib.Path) -> None:
    report, html = single
    path = tmp_path / "replay.html"
    path.write_text(html)
    with sync_page(width=1400, height=1000) as raw:
        page = OpenedFile(raw, path)
        chips = chip_values(raw)
        assert chips["pods"] == str(report["summary"]["pods"])
        assert chips["scheduled"] == str(report["summary"]["scheduled"])
        assert chips["pending at the end"] == str(report["summary"]["pending"])
        assert chips["preempted"] == str(report["summary"]["preempted"])
        # A chart per resource, then pods, waits and preemptions.
        ids = raw.eval_on_selector_all("svg.chart", "(els) => els.map((e) => e.id)")
        assert ids == ["alloc-cpu", "alloc-memory", "alloc-nvidia-com-gpu", "pods", "wait", "preempted"]
        assert raw.locator("#preemptions-card tbody tr").count() == len(report["preemptions"])
        # Hovering the GPU chart at its left edge shows the first sample's values.
        box = raw.locator("#alloc-nvidia-com-gpu rect").last.bounding_box()
        raw.mouse.move(box["x"] + 1, box["y"] + box["height"] / 2)
        tip = raw.inner_text(".tip")
        first = report["series"]["allocated"]["nvidia.com/gpu"][0] / report["capacity"]["nvidia.com/gpu"]
        assert tip.split("\n")[0] == "t = 0s"
        assert f"allocated: {100 * first:.0f}%" in tip.split("\n")
        # The final per-node picture: a click on the GPU zone's cell shows its GPUs too.
        assert raw.locator("canvas.heat").count() == 3
        pending = raw.locator("#pending-list li").all_inner_texts()
        assert len(pending) == report["summary"]["pending"]
        gpu_node = next(n for n in report["nodes"] if n["name"] == "gpu-a1")
        raw.screenshot(path=str(tmp_path / "replay.png"), full_page=True)
        page.check_clean()
    assert gpu_node["allocatable"]["nvidia.com/gpu"] == "4"
    assert (tmp_path / "replay.png").read_bytes()[:4] == b"\x89PNG"


def test_replay_compare_report_has_both_runs_on_one_time_axis(compared: tuple[dict[str, Any], str],
                                                              tmp_path: pathlib.Path) -> None:
    report, html = compared
    path = tmp_path / "compare.html"
    path.write_text(html)
    with sync_page(width=1400, height=1000) as raw:
        page = OpenedFile(raw, path)
        runs = raw.locator("section.run").evaluate_all("(els) => els.map((e) => e.dataset.run)")
        assert runs == ["before", "after"]
        before, after = report["before"]["summary"], report["after"]["summary"]
        assert chip_values(raw)["scheduled"] == f"{before['scheduled']} → {after['scheduled']}"
        assert raw.locator("svg.chart").count() == 12
        # Both columns' charts end at the later run's end.
        labels = raw.eval_on_selector_all(
            "svg.chart", "(els) => els.map((e) => [...e.querySelectorAll('text')].pop().textContent)")
        assert len(set(labels)) == 1
        page.check_clean()
