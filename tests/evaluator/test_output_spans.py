"""The runner's publish flags outputs that lie in the harness's shared regions, by address, whatever
tensor object they come as (a view, a slice, a tensor rebuilt over the same bytes)."""

from __future__ import annotations

import torch

from stark_mcp.evaluator.untrusted.outputs import HarnessSpans, describe_and_publish


def span(t: torch.Tensor) -> tuple[int, int]:
    return (t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())


def flags_of(out, harness, inputs=()):
    expected = [torch.empty(4, 8)]
    _tree, flags = describe_and_publish(out, expected, list(inputs), harness=harness)
    return flags


def test_outputs_inside_the_output_region_are_flagged_by_address() -> None:
    inputs_region, outputs_region = torch.zeros(4096, dtype=torch.uint8), torch.zeros(4096, dtype=torch.uint8)
    harness = HarnessSpans(span(inputs_region), span(outputs_region))
    own = torch.ones(4, 8)
    assert flags_of(own, harness) == []
    in_region = outputs_region[128 : 128 + 128].view(torch.float32).view(4, 8)
    assert flags_of(in_region, harness) == ["output_in_harness_region"]
    # The same bytes behind a storage of its own: the flag follows the address, not the object.
    rebuilt = torch.frombuffer(memoryview(outputs_region.numpy())[256:384], dtype=torch.float32).view(4, 8)
    assert rebuilt.untyped_storage().data_ptr() != outputs_region.untyped_storage().data_ptr()
    assert flags_of(rebuilt, harness) == ["output_in_harness_region"]


def test_an_output_over_the_input_region_aliases_an_input_even_under_a_new_storage() -> None:
    inputs_region = torch.zeros(4096, dtype=torch.uint8)
    harness = HarnessSpans(span(inputs_region), (0, 0))
    view = inputs_region[512 : 512 + 128].view(torch.float32).view(4, 8)
    rebuilt = torch.frombuffer(memoryview(inputs_region.numpy())[512:640], dtype=torch.float32).view(4, 8)
    assert flags_of(rebuilt, harness) == ["output_aliases_input"]
    # Without the spans only a shared storage with a passed input is seen (the old check).
    assert flags_of(rebuilt, HarnessSpans(), inputs=[view]) == []
    assert flags_of(view, HarnessSpans(), inputs=[view]) == ["output_aliases_input"]
