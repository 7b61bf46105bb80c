"""validation/formal/corpus.py: the corpus list and the comparison that flags a new alarm or an overlong run."""

from __future__ import annotations

from validation.formal.corpus import compare, kernels


def test_corpus_lists_every_entry():
    ks = kernels()
    assert len(ks) >= 45
    assert ("tests/fixtures/cluster/cluster_latency.ptx", "cluster_latency") in ks
    assert ("tests/fixtures/cuda/cp_async.ptx", "cp_async_v4") in ks  # two entries of one file


def test_compare_flags_proved_to_violated_and_overlong_runs():
    old = [{"file": "a.ptx", "kernel": "k", "properties": {"bounds": "proved", "shared_race": "unknown"}}]
    new = [{"file": "a.ptx", "kernel": "k", "wall": 15.2,
            "properties": {"bounds": "violated", "shared_race": "violated"}}]
    out = compare(new, old, 10.0)
    assert out == ["a.ptx k: 15.2 s wall > --timeout 10 + 5", "a.ptx k: bounds proved before, violated now"]
    assert compare([{**new[0], "wall": 14.9, "properties": {"bounds": "unknown"}}], old, 10.0) == []


def test_a_split_property_is_compared_with_the_ones_it_came_from():
    # async_proxy was part of wgmma and async_copy: violated now where both were proved is a new alarm
    old = [{"file": "a.ptx", "kernel": "k", "properties": {"wgmma": "proved", "async_copy": "proved"}},
           {"file": "b.ptx", "kernel": "k", "properties": {"wgmma": "violated", "async_copy": "proved"}}]
    new = [{"file": f, "kernel": "k", "wall": 1.0, "properties": {"wgmma": "proved", "async_proxy": "violated"}}
           for f in ("a.ptx", "b.ptx")]
    assert compare(new, old, 10.0) == ["a.ptx k: async_proxy proved before, violated now"]
