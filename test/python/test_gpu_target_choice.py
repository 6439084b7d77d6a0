"""Which cubins of an artifact a GPU runs (attn.triton_backend.choose_cuda_target, the
runtime's rule: runtime/library.cpp choose_cuda_image), and so when a Python call falls
back to compiling the embedded Triton source instead; no GPU or Triton needed."""
from attn.triton_backend import choose_cuda_target, decode_split, select_schedule


def test_exact_then_same_major_lower_minor_else_none():
    targets = ["sm_80", "sm_86", "sm_90"]
    assert choose_cuda_target(targets, 9, 0) == "sm_90"
    assert choose_cuda_target(targets, 8, 6) == "sm_86"
    assert choose_cuda_target(targets, 8, 9) == "sm_86"  # newest of the major below it
    assert choose_cuda_target(["sm_80"], 8, 6) == "sm_80"
    assert choose_cuda_target(targets, 10, 0) is None  # a newer major: the JIT fallback
    assert choose_cuda_target(targets, 7, 5) is None
    assert choose_cuda_target(["sm_86"], 8, 0) is None  # a higher minor never runs
    assert choose_cuda_target(["sm_90a", "sm_90"], 9, 0) == "sm_90"
    assert choose_cuda_target(["sm_90a"], 9, 1) is None  # arch-specific: exact only
    assert choose_cuda_target(["compute_90", "sm_"], 9, 0) is None


def test_schedule_of_a_chip_without_its_own_entry():
    fwd80, fwd90 = (128, 64, 4, 2), (128, 64, 8, 3)
    schedules = {("sm_80", "bf16", 64): dict(forward=fwd80, backward=fwd80),
                 ("sm_90", "bf16", 64): dict(forward=fwd90, backward=fwd90)}
    default = dict(forward=(64, 64, 4, 2), backward=(64, 64, 4, 2))
    assert select_schedule(schedules, default, "sm_90", "bf16", 64)["forward"] == fwd90
    assert select_schedule(schedules, default, "sm_89", "bf16", 64)["forward"] == fwd80
    assert select_schedule(schedules, default, "sm_120", "bf16", 64)["forward"] == fwd90
    assert select_schedule(schedules, default, "sm_90", "f16", 64) is default
    assert select_schedule(schedules, default, "sm_75", "bf16", 64) is default


def test_decode_split_choice():
    """decode_split: attn_fwd where its programs fill the GPU or rows are many; else
    chunks of whole key tiles for programs_per_sm programs per SM, at most one per tile."""
    rule = dict(max_rows=16, programs_per_sm=2)
    choose = lambda nq, nk, group, bkv, sms=132: decode_split(
        nq, nk, group, bkv, 128, 64, 16, sms, rule)
    assert choose(1, 8192, 4, 8) == (32, 256)        # 8 programs, 264 wanted: 32 chunks of 4 tiles
    assert choose(1, 8192, 8, 4) == (64, 128)
    assert choose(1, 100, 4, 8) == (2, 64)           # at most one chunk per key tile
    assert choose(1, 64, 4, 8) is None               # one tile: nothing to split
    assert choose(17, 8192, 1, 8) is None            # more rows than a decode tile
    assert choose(1, 8192, 8, 32) is None            # 256 programs fill 132 SMs
    assert choose(1, 8192, 4, 8, sms=None) is None   # not a GPU: no SM count
    assert decode_split(5, 45, 2, 2, 16, 16, 16, None, rule, splits=3) == (3, 16)
