"""`-o html` in a real headless Chromium: each kind of report opens with no error and no
network request, a click on a pending pod shows its reasons, and 5000 nodes stay a small DOM."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
from typing import Any

import pytest

from kopfsched.cli import main
from kopfsched.simulate.html import reason_counts, simulate_html
from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate
from kopfsched.testing import make_node, make_pod
from tests.browser import OpenedFile, sync_page

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
CLUSTER = str(EXAMPLES / "cluster.yaml")
PACKED = str(EXAMPLES / "profiles" / "packed-default.yaml")


def render(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, name: str, *argv: str) -> pathlib.Path:
    assert main([*argv, "-o", "html"]) == 0
    path = tmp_path / f"{name}.html"
    path.write_text(capsys.readouterr().out)
    return path


def report_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


class Page(OpenedFile):
    """A simulate report opened in Chromium."""

    def reasons(self) -> list[str]:
        return [" ".join(t.split()) for t in self.page.locator("#pod-reasons .reason").all_inner_texts()]


def test_reason_counts_reads_upstreams_histogram() -> None:
    message = ("0/24 nodes are available: 1 node(s) were unschedulable, 20 Insufficient cpu, 3 node(s) had "
               "untolerated taint(s). preemption: 0/24 nodes are available: 24 Preemption is not helpful for "
               "scheduling.")
    assert reason_counts(message) == [[1, "node(s) were unschedulable"], [20, "Insufficient cpu"],
                                      [3, "node(s) had untolerated taint(s)"]]
    assert reason_counts('no profile named "x"') == []


def test_simulate_report_click_a_pending_pod(capsys, tmp_path: pathlib.Path) -> None:
    expected = {p["name"]: p for p in report_json(capsys, "simulate", CLUSTER)["pods"]}["analytics-warehouse-0"]
    path = render(capsys, tmp_path, "simulate", "simulate", CLUSTER)
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        assert raw.locator("canvas.heat").count() == 3  # one per zone
        assert raw.locator(".zone h3").all_inner_texts()[0].split("\n")[0] == "eu-west-1a"
        raw.click('[data-pod="analytics/analytics-warehouse-0"]')
        assert raw.inner_text("#pod-message") == expected["message"]
        assert page.reasons() == ["Insufficient cpu 20 nodes", "Insufficient memory 20 nodes",
                                  "node(s) had untolerated taint(s) 3 nodes", "node(s) were unschedulable 1 nodes"]
        raw.locator("canvas.heat").first.click(position={"x": 5, "y": 5})  # the zone's first node
        assert raw.inner_text("#detail h2").startswith("arm-a1")
        raw.screenshot(path=str(tmp_path / "simulate.png"), full_page=True)
        page.check_clean()
    assert (tmp_path / "simulate.png").read_bytes()[:4] == b"\x89PNG"


def test_explain_report_groups_grid_and_reasons(capsys, tmp_path: pathlib.Path) -> None:
    entry = report_json(capsys, "explain", "ml/inference-0", CLUSTER)
    path = render(capsys, tmp_path, "explain", "explain", "ml/inference-0", CLUSTER)
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        assert raw.inner_text("#explain-mode") == "Mode: " + entry["modeText"]
        raw.click('[data-pod="ml/inference-0"]')
        assert raw.inner_text("#pod-message") == entry["message"]
        assert page.reasons()[0] == "Insufficient nvidia.com/gpu (NodeResourcesFit) 17 nodes"
        groups = raw.locator("#groups .g").all_inner_texts()
        # As simulate's run finds the cluster at the pod's first attempt: metrics-agent-0 is on arm-b1.
        assert [" ".join(g.split()) for g in groups] == [
            "17 Insufficient nvidia.com/gpu (NodeResourcesFit)",
            "3 node(s) had untolerated taint(s) (TaintToleration)",
            "2 Insufficient memory; Insufficient nvidia.com/gpu (NodeResourcesFit)",
            "1 Insufficient cpu; Insufficient memory; Insufficient nvidia.com/gpu (NodeResourcesFit)",
            "1 node(s) were unschedulable (NodeUnschedulable)"]
        raw.click('#grid tr[data-node="gpu-b1"]')  # the GPUs the node offers, in its detail
        assert "nvidia.com/gpu" in raw.inner_text("#detail")
        assert raw.inner_text("#node-taints") == "Taints: dedicated=gpu:NoSchedule"
        raw.locator("#groups .g").nth(1).click()  # narrow the grid to the tainted nodes
        assert raw.locator("#grid tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)") == \
            ["gpu-a1", "gpu-b1", "gpu-c1"]
        raw.screenshot(path=str(tmp_path / "explain.png"), full_page=True)
        page.check_clean()


def test_simulate_report_lists_placements_marks_nodes_and_colours_by_any_resource(capsys, tmp_path) -> None:
    report = report_json(capsys, "simulate", CLUSTER)
    path = render(capsys, tmp_path, "simulate-resources", "simulate", CLUSTER)
    with sync_page(width=1400, height=1200) as raw:
        page = Page(raw, path)
        placed = [" ".join(t.split()) for t in raw.locator("#placements-list li").all_inner_texts()]
        scheduled = [p for p in report["pods"] if p["result"] == "Scheduled"]
        assert placed == [f"Scheduled {p['namespace']}/{p['name']} → {p['node']}" for p in scheduled]
        # A pending message is there whole, not cut at "...untolerated t...".
        [legacy] = [p for p in report["pods"] if p["name"] == "legacy-app-0"]
        shown = raw.locator('#pending-list [data-pod="shop/legacy-app-0"] .m')
        assert shown.inner_text() == legacy["message"]
        assert shown.evaluate("m => m.scrollWidth <= m.clientWidth")
        rows = {r.split()[0]: " ".join(r.split()) for r in raw.locator("#nodes-table tbody tr").all_inner_texts()}
        assert rows["infra-c1"].startswith("infra-c1 cordoned ")
        assert rows["gpu-a1"].startswith("gpu-a1 tainted dedicated=gpu:NoSchedule ")
        assert not rows["general-a1"].startswith(("general-a1 tainted", "general-a1 cordoned"))
        assert raw.locator("#nodes-table th").all_inner_texts()[-1] == "nvidia.com/gpu"
        options = raw.locator("#colour-by option").evaluate_all("os => os.map(o => o.value)")
        assert options == ["busiest", "cpu-memory", "cpu", "memory", "pods", "nvidia.com/gpu"]
        raw.select_option("#colour-by", "nvidia.com/gpu")
        assert "> 80% (nvidia.com/gpu)" in raw.inner_text(".legend")
        # arm-a1, the first cell of the first zone, has no GPU: drawn as "does not offer it".
        pixel = raw.locator("canvas.heat").first.evaluate(
            "c => Array.from(c.getContext('2d').getImageData(5, 5, 1, 1).data)")
        assert pixel[:3] == [0xf4, 0xf6, 0xf8]
        raw.screenshot(path=str(tmp_path / "simulate-gpu.png"), full_page=True)
        page.check_clean()


def test_simulate_report_shows_the_preemptor_and_its_victim(capsys, tmp_path) -> None:
    affinity = str(EXAMPLES / "affinity-and-preemption.yaml")
    path = render(capsys, tmp_path, "preemption", "simulate", affinity)
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        raw.fill("#placements .search", "payments")  # the preemptor, and its victim with it
        assert [" ".join(t.split()) for t in raw.locator("#placements-list li").all_inner_texts()] == [
            "Scheduled default/payments-0 → node-b2 preempted default/batch-b2 after: "
            "0/6 nodes are available: 6 Insufficient cpu. preemption: found a potential placement for pod on "
            "node node-b2, preempting 1 victims",
            "Preempted default/batch-b2 preempted by default/payments-0 on node-b2"]
        page.check_clean()


def test_explain_report_scores_and_chosen_node(capsys, tmp_path: pathlib.Path) -> None:
    entry = report_json(capsys, "explain", "shop/frontend-0", CLUSTER)
    path = render(capsys, tmp_path, "explain-fits", "explain", "shop/frontend-0", CLUSTER)
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        chosen = raw.locator(f'#grid tr[data-node="{entry["node"]}"] td')
        cells = [c.strip() for c in chosen.all_inner_texts()]
        scores = entry["scores"][entry["node"]]
        assert cells[0] == f"{entry['node']} ★"
        assert cells[-2:] == [str(scores["total"]), "1"]
        page.check_clean()


def test_compare_report_changed_pods_and_pending(capsys, tmp_path: pathlib.Path) -> None:
    argv = ("simulate", CLUSTER, "--reschedule-all", "--compare", PACKED)
    report = report_json(capsys, *argv)
    path = render(capsys, tmp_path, "compare", *argv)
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        rows = raw.locator("#changes tbody tr").evaluate_all("rows => rows.map(r => r.dataset.pod)")
        assert rows == [f"{c['namespace']}/{c['name']}" for c in report["changes"]][:25]
        assert raw.locator("canvas.heat").count() == 6  # three zones, before and after
        raw.click('#pending [data-pod="shop/legacy-app-0"]')
        after = {p["name"]: p for p in report["after"]["pods"]}["legacy-app-0"]
        assert raw.inner_text("#pod-message") == after["message"]
        assert "node(s) didn't match Pod's node affinity/selector 20 nodes" in page.reasons()
        raw.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
        page.check_clean()


def test_five_thousand_nodes_stay_a_small_page(tmp_path: pathlib.Path) -> None:
    zones = ("z-a", "z-b", "z-c")
    nodes = [make_node(f"node-{i:04}", cpu="8", labels={"topology.kubernetes.io/zone": zones[i % 3]})
             for i in range(5000)]
    running = [make_pod(f"run-{i:05}", requests={"cpu": "1"}, node_name=f"node-{i % 5000:04}") for i in range(10000)]
    pending = [make_pod(f"big-{i}", requests={"cpu": "64"}) for i in range(3)]
    sim = asyncio.run(simulate(load_objects([*nodes, *running, *pending], "test")))
    path = tmp_path / "big.html"
    path.write_text(simulate_html(sim, to_json(sim, explain=False)))
    with sync_page(width=1400, height=1000) as raw:
        page = Page(raw, path)
        assert raw.locator("canvas.heat").count() == 3
        assert raw.evaluate("document.getElementsByTagName('*').length") < 1500
        assert raw.locator("table tbody tr").count() == 25  # one page of the node table
        assert re.search(r"1\u201325 of 5000", raw.inner_text("body"))  # an en dash
        raw.fill("input.search >> nth=0", "node-4999")
        assert raw.locator("table tbody tr").count() == 1
        raw.click('[data-pod="default/big-1"]')
        assert page.reasons() == ["Insufficient cpu 5000 nodes"]
        page.check_clean()
