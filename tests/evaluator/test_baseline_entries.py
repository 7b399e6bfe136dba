"""The baseline cache's entries as typed records: read from and written back to the signed file
exactly as the dicts the cache held before them, so existing caches stay valid and signed."""

from __future__ import annotations

import json
from pathlib import Path

from stark_mcp.evaluator.host.integrity import Integrity
from stark_mcp.evaluator.host.signed_caches import BaselineCache, BaselineEntry

STATS = {"median_ms": 2.0, "iqr_ms": 0.1, "mean_ms": 2.1, "min_ms": 1.9, "max_ms": 2.5, "samples": 30,
         "unit": "ms"}
EAGER = {**STATS, "median_ms": 2.2}
# As the cache wrote them when entries were dicts: a compiled mode timed on two shapes, a baseline
# that could not be timed, and one timed before eager was kept beside each shape.
TIMED = {"shapes": [{"label": "small", "stats": STATS, "eager": EAGER},
                    {"label": "large", "stats": STATS, "eager": EAGER}],
         "mode": "compile", "first_calls_s": 12.5}
EAGER_ONLY = {"shapes": [{"label": "default", "stats": STATS, "eager": EAGER}], "mode": "eager",
              "first_calls_s": None}
MISSING = {"missing": "inductor: no C compiler"}
OLD = {"shapes": [{"label": "default", "stats": STATS}], "mode": "compile", "first_calls_s": 3.0}


def _cache(tmp_path: Path) -> tuple[BaselineCache, Integrity, Path]:
    integrity = Integrity(tmp_path)
    return BaselineCache(tmp_path / "baselines", integrity, reuse=True), integrity, tmp_path / "b.json"


def test_entries_written_back_are_the_dicts_the_cache_held(tmp_path: Path) -> None:
    cache, integrity, path = _cache(tmp_path)
    held = {"compile": TIMED, "eager": EAGER_ONLY, "max-autotune": MISSING, "reduce-overhead": OLD}
    path.write_text(json.dumps({"data": held, "sig": integrity.sign(held)}))  # a file from before

    entries = cache.load(path)
    assert set(entries) == set(held)
    assert entries["compile"].shapes is not None and entries["compile"].shapes[1].label == "large"
    assert entries["max-autotune"].missing == MISSING["missing"] and not entries["max-autotune"].timed
    old = entries["reduce-overhead"].shapes
    assert old is not None and old[0].eager is None

    cache.store(path, entries)
    wrapper = json.loads(path.read_text())
    assert wrapper["data"] == held  # nothing added, nothing lost: the same bytes are signed
    assert wrapper["sig"] == integrity.sign(held)


def test_an_entry_off_the_schema_is_left_out_and_the_rest_kept(tmp_path: Path) -> None:
    cache, integrity, path = _cache(tmp_path)
    held = {"compile": TIMED, "broken": {"shapes": [{"stats": STATS}]}, "odd": "not an entry"}
    path.write_text(json.dumps({"data": held, "sig": integrity.sign(held)}))
    assert set(cache.load(path)) == {"compile"}  # the others are timed again


def test_an_unsigned_file_gives_no_entries(tmp_path: Path) -> None:
    cache, _, path = _cache(tmp_path)
    path.write_text(json.dumps({"data": {"compile": TIMED}, "sig": "0" * 64}))
    assert cache.load(path) == {}
    assert BaselineEntry.model_validate(TIMED).to_json() == TIMED
