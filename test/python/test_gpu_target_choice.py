"""Which cubins of an artifact a GPU runs (attn.triton_backend.choose_cuda_target, the
runtime's rule: runtime/library.cpp choose_cuda_image), and so when a Python call falls
back to compiling the embedded Triton source instead; no GPU or Triton needed."""
from attn.triton_backend import choose_cuda_target, select_schedule


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
