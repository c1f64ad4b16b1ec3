"""The fast YAML path (yaml_rs) gives exactly what the libyaml path gives, or steps aside."""

import random

import pytest
import yaml

from kopfsched.documents import fast_yaml, libyaml, reader

EXPORT = """\
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {kubernetes.io/hostname: node-1, topology.kubernetes.io/zone: zone-a}
spec:
  unschedulable: false
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status:
  allocatable: {cpu: '32', memory: 128Gi, pods: '110'}
---
# a comment between documents
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: default
  creationTimestamp: 2026-01-01T00:00:00Z
  annotations:
    note: |
      a block scalar
      ---not a marker: it does not start a line with "--- "
    folded: >-
      folded
      text
spec:
  priority: -10
  terminationGracePeriodSeconds: 30
  containers:
  - name: c
    image: nginx:1.27
    ports: [{containerPort: 80, hostPort: 8080}]
    resources: {requests: {cpu: 100m, memory: 1.5Gi}, limits: {nvidia.com/gpu: 1}}
  overhead: ~
  nodeSelector: {disk: ssd, ratio: 0.5, big: 12345678901234567890, neg: -0.25, nil: null, yes_key: true}
---
---
"""


def _libyaml(text: str):
    return list(libyaml.items(text.encode(), None, True))


def _fast(text: str):
    return fast_yaml.read(text, None, libyaml.values)


def test_a_plain_export_takes_the_fast_path_with_the_same_result():
    fast = _fast(EXPORT)
    assert fast is not None, "the fast path declined a plain export"
    assert fast == _libyaml(EXPORT)
    assert [index for index, _, _ in fast] == [1, 2, 3, 4]


@pytest.mark.parametrize("value", [
    pytest.param("yes", id="yaml-1.1-bool-yes"),
    pytest.param("Off", id="yaml-1.1-bool-off"),
    pytest.param("010", id="yaml-1.1-octal"),
    pytest.param("0o17", id="yaml-1.2-octal"),
    pytest.param("0b101", id="binary"),
    pytest.param("1_000", id="underscores"),
    pytest.param("1:30", id="sexagesimal"),
    pytest.param("1e3", id="exponent-without-dot"),
    pytest.param("1.5E3", id="exponent-without-sign"),
    pytest.param("=", id="value-tag"),
    pytest.param(".nan", id="nan"),
])
def test_scalars_read_differently_by_yaml_1_2_keep_their_yaml_1_1_reading(value):
    for text in (f"kind: Pod\nmetadata: {{name: p}}\nspec: {{x: {value}}}\n",
                 f"kind: Pod\nlist:\n- {value}\n", f"kind: Pod\nflow: [a, {value}, b]\n", f"{value}: key\n"):
        expected = repr(_libyaml(text))  # repr: nan is not equal to itself
        assert repr(list(reader.yaml_items(text.encode(), None))) == expected
        fast = _fast(text)
        assert fast is None or repr(fast) == expected


@pytest.mark.parametrize("text", [
    pytest.param("a: &x 1\nb: *x\n", id="anchor-alias"),
    pytest.param("a: !!str 1\n", id="tag"),
    pytest.param("base: {a: 1}\nc:\n  <<: {b: 2}\n", id="merge-key"),
    pytest.param("? [a, b]\n: c\n", id="complex-key"),
    pytest.param("[a, b]: c\n", id="flow-key"),
    pytest.param("%YAML 1.1\n---\na: 1\n", id="directive"),
    pytest.param("a: 1\n...\n---\nb: 2\n", id="document-end"),
    pytest.param("a: \x07\n", id="control-character"),
    pytest.param("a: x\x85y\n", id="next-line-character"),
    pytest.param("a: x\u2028y\n", id="line-separator"),
    pytest.param("a: 1\rb: 010\r", id="carriage-returns"),
    pytest.param("a: [1, 2\n", id="syntax-error"),
])
def test_what_the_fast_path_does_not_take_goes_to_libyaml(text):
    assert _fast(text) is None
    assert list(reader.yaml_items(text.encode(), None)) == _libyaml(text)


def test_windows_line_endings_still_find_every_scalar():
    text = "kind: Pod\r\nspec:\r\n  a: 010\r\n  b: yes\r\n"
    assert _fast(text) is None
    assert list(reader.yaml_items(text.encode(), None)) == _libyaml(text)
    plain = "kind: Pod\r\nspec:\r\n  a: 10\r\n  b: true\r\n"
    assert _fast(plain) == _libyaml(plain) == [(1, {"kind": "Pod", "spec": {"a": 10, "b": True}}, None)]


def test_duplicate_keys_keep_the_last_as_pyyaml():
    assert _fast("a: 1\na: 2\n") == [(1, {"a": 2}, None)] == _libyaml("a: 1\na: 2\n")


def test_a_generated_export_reads_the_same_both_ways():
    objects = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "labels": {"app": f"a{i % 7}"}},
                "spec": {"priority": i, "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{i}m"}}}],
                         "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 300}]}}
               for i in range(50)]
    text = yaml.safe_dump_all(objects, sort_keys=False)
    fast = _fast(text)
    assert fast is not None
    assert fast == _libyaml(text)
    assert [doc for _, doc, _ in fast] == objects


def test_documents_split_as_the_marker_pattern_says():
    """split_documents (str.split) cuts exactly where the `---` pattern does, on every
    arrangement of markers, dashes, blanks and line breaks (seeded, so reproducible)."""
    rng = random.Random(7)
    alphabet = ["-", "---", "\n", "\n---", "\r\n", "\r", " ", "\t", "a"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert fast_yaml.split_documents(text) == fast_yaml._DOC_START.split(text), repr(text)
