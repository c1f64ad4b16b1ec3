"""`kopfsched plan -o html` in a real headless Chromium: the plan's cards show what -o json
says, the before/after pictures mark the removed and added nodes, and nothing is fetched.
The screenshot goes to the test's tmp_path; with KOPFSCHED_UPDATE_SCREENSHOTS=1 it also
replaces docs/plan.png (the page shows the time it was generated, so every run differs)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

from kopfsched.cli import main
from tests.browser import file_url, sync_page

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ARGV = ["plan", str(EXAMPLES / "cluster.yaml"), "--node-template", str(EXAMPLES / "node-templates.yaml")]


def test_plan_report_shows_the_plan_and_both_pictures(capsys, tmp_path: pathlib.Path) -> None:
    assert main([*ARGV, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main([*ARGV, "-o", "html"]) == 0
    path = tmp_path / "plan.html"
    path.write_text(capsys.readouterr().out)
    with sync_page(width=1400, height=1000) as page:
        errors: list[str] = []
        requests: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(file_url(path))
        added = page.locator("#plan-add tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)")
        assert added == [n["name"] for n in report["addedNodes"]] == ["general-large-1", "gpu-a100x8-1"]
        times = "\u00d7"
        assert page.inner_text("#plan-add h2 .sub") == (f"1 {times} general-large (1.536) + 1 {times} gpu-a100x8 "
                                                         "(32.77) · minimal · by price")
        unhelped = page.locator("#plan-unhelped tbody tr").evaluate_all("rows => rows.map(r => r.dataset.pod)")
        assert unhelped == ["ml/inference-0"] * 3 + ["shop/legacy-app-0"] * 3
        assert page.locator("#plan-unhelped td.rej").all_inner_texts()[2] == \
            "✗ node(s) had untolerated taint(s) (TaintToleration)"
        removed = page.locator("#plan-remove tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)")
        assert removed == [r["node"] for r in report["remove"]]
        kept = page.locator("#plan-keep tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)")
        assert kept == [k["node"] for k in report["keep"]]
        assert page.locator("canvas.heat").count() == 6  # three zones, before and after
        page.click('#plan-add tr[data-node="general-large-1"]')
        assert page.inner_text("#detail h2").startswith("general-large-1")
        assert "analytics/analytics-warehouse-0" in page.inner_text("#detail .pods")
        page.click('#plan-keep tr[data-node="infra-a1"]')
        assert page.inner_text("#detail .msg") == "BlockedByPod: NotReplicated: kube-system/coredns-1 is not replicated"
        page.click('#pending [data-pod="ml/inference-0"]')
        data = json.loads(page.evaluate("document.getElementById('data').textContent"))
        after = {p["key"]: p for p in data["after"]["pods"]}
        assert page.inner_text("#pod-message") == after["ml/inference-0"]["message"]
        page.click('#plan-add tr[data-node="general-large-1"]')
        page.screenshot(path=str(tmp_path / "plan.png"), full_page=True)
        assert errors == []
        assert [url for url in requests if not url.startswith("file:")] == []
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("KOPFSCHED_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(tmp_path / "plan.png", ROOT / "docs" / "plan.png")
