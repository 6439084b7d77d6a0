"""The tiled backward walks keys in blocks that stay in L2 (TiledLoops.cpp,
kBackwardKeyBlockBytes: 512 keys at d = 64 and 256 at d = 128 in f32, half as many in
f64), every row block inside each, so dq accumulates over the blocks. Rows spanning
several blocks, rows that end inside one (causal) and padded keys, against the float64
reference: O and every gradient (multimax's params too)."""
import pytest
import torch

import helpers

N = 700  # 2 key blocks at d = 64 f32, 3 at d = 128 f32, up to 6 in f64; not a multiple


@pytest.mark.parametrize("name", ["softmax", "multimax"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_backward_over_key_blocks_matches_reference(artifacts, name, d, causal, dtype):
    q, k, v, dout, key_lengths = helpers.make_inputs(
        name, 2, 1, N, N, d, d, helpers.seed_of("key-blocks", name, d, causal), padding=True,
        dtype=dtype)
    helpers.check_example_against_reference(
        artifacts(name), name, q, k, v, helpers.case_params(name, dtype), dout, causal,
        key_lengths, dtype, context=f"{name} d={d} causal={causal}")
