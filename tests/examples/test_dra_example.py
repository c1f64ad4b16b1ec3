"""examples/dra.yaml through simulate: two A100s on one PCIe root for the trainer (the
claim from its template written with the allocation and the pod in reservedFor), and
upstream's reason for the pod whose claim fits no node."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kopfsched.simulate.loader import load_files
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

DRA = str(Path(__file__).resolve().parents[2] / "examples" / "dra.yaml")


def test_dra_example():
    inputs = load_files([DRA])
    assert inputs.problems == []
    sim = asyncio.run(simulate(inputs, seed=0, explain=True))
    report = to_json(sim, explain=True)
    pods = {p["name"]: p for p in report["pods"]}
    assert [(p["name"], p["result"], p["node"]) for p in report["pods"]] == [
        ("trainer", "Scheduled", "gpu-a100-2"), ("llm-finetune", "Unschedulable", None)]
    assert pods["llm-finetune"]["message"] == (
        "0/4 nodes are available: 4 cannot allocate all claims. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")  # v1.37.2's, word for word
    assert pods["trainer"]["filter"] == {
        node: {"plugin": "DynamicResources", "code": "UnschedulableAndUnresolvable",
               "reasons": ["cannot allocate all claims"]} for node in ("gpu-l4-1", "gpu-l4-2")}
    claims = {key[2]: obj for key, obj in sim.client.objects.items() if key[0] == "ResourceClaim"}
    trainer_claim = next(c for name, c in claims.items() if name.startswith("trainer-gpus-"))
    results = trainer_claim["status"]["allocation"]["devices"]["results"]
    # The first two A100s that share a PCIe root (gpu-0 and gpu-1 on root 00).
    assert [(r["pool"], r["device"]) for r in results] == [("gpu-a100-2", "gpu-0"), ("gpu-a100-2", "gpu-1")]
    assert trainer_claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": "ml/trainer"}]
    assert trainer_claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert "status" not in next(c for name, c in claims.items() if name.startswith("llm-finetune-gpus-"))


def test_explain_reads_the_dra_kinds_and_makes_the_template_claims(capsys):
    import json

    from kopfsched.cli import main

    assert main(["explain", "ml/llm-finetune", DRA, "-o", "json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert (explained["result"], explained["node"]) == ("Unschedulable", None)
    assert explained["message"].startswith("0/4 nodes are available: 4 cannot allocate all claims.")
    assert main(["explain", "ml/trainer", DRA, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["node"] == "gpu-a100-2"
