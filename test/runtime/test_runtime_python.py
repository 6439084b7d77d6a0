"""Python-side tests of the attn runtime against fixture artifacts (no compiler).

Run by ctest (runtime_python_test) with ATTN_RUNTIME_LIB, PYTHONPATH=runtime/python and
ATTN_FX_* (fixture paths) set. The probe fixture's kernels do not compute attention;
they copy inputs around in a documented way (test/runtime/fixtures/probe.c) so that
the plumbing (op registration, autograd, strides, masks, params) can be checked.
"""
import os
import unittest

import torch

import attn


def fixture(name):
    path = os.environ.get("ATTN_FX_" + name.upper())
    if not path:
        raise unittest.SkipTest(f"ATTN_FX_{name.upper()} not set (run through ctest)")
    return path


def probe_forward_ref(q, v, params, kv, causal):
    B, H, Nq, d = q.shape
    Nk, dv = v.shape[2], v.shape[3]
    o = q[..., torch.arange(dv) % d] + 10 * v[:, :, torch.arange(Nq) % Nk] + params[0]
    rm = torch.tensor(kv, dtype=q.dtype).view(B, 1, 1).expand(B, H, Nq)
    rs = ((-1 if causal else 1) * (torch.arange(Nq) + 1)).to(q.dtype).expand(B, H, Nq)
    return o, rm, rs


def probe_backward_ref(q, k, v, params, o, rm, rs, dout, kv, causal):
    B, H, Nq, d = q.shape
    Nk, dv = v.shape[2], v.shape[3]
    dq = dout[..., torch.arange(d) % dv] + rm.unsqueeze(-1)
    dk = 2 * k + rs[:, :, torch.arange(Nk) % Nq].unsqueeze(-1)
    dvv = v + o[:, :, torch.arange(Nk) % Nq]
    for b, kv_len in enumerate(kv):  # keys past kv_len get no gradient
        dk[b, :, kv_len:] = 0
        dvv[b, :, kv_len:] = 0
    dp = B * H * params + H * sum(kv) + (100 * B * H if causal else 0)
    return dq, dk, dvv, dp


class RuntimePythonTest(unittest.TestCase):
    def test_ops_registered(self):
        attn._ensure_runtime()
        self.assertTrue(hasattr(torch.ops.attn, "attention"))
        self.assertTrue(hasattr(torch.ops.attn, "attention_forward"))
        text = torch.ops.attn.manifest(fixture("probe"))
        self.assertEqual(attn.parse_manifest(text)["kernel"], "probe_attention")

    def test_load_and_manifest(self):
        k = attn.load(fixture("probe"))
        self.assertEqual(k.param_names, ["scale", "shift"])
        self.assertEqual(k.manifest["abi"], attn.manifest.SCHEMA["properties"]["abi"]["const"])
        self.assertEqual(k.manifest["kernel"], "probe_attention")
        self.assertEqual(k.manifest["dtypes"], ["f32", "f64"])
        self.assertEqual(k.manifest["devices"], ["cpu"])
        self.assertEqual(dict(attn.manifest.param_inits(k.manifest)), {"scale": 2.0, "shift": -0.5})
        p = k.initial_params()
        self.assertEqual(p.dtype, torch.float32)
        self.assertEqual(p.tolist(), [2.0, -0.5])
        self.assertFalse(p.requires_grad)
        self.assertEqual(k.initial_params(torch.float64).dtype, torch.float64)
        self.assertIn("probe_attention", repr(k))

    def test_cuda_manifest(self):
        k = attn.load(fixture("triton_gpu"))
        self.assertEqual(k.manifest["devices"], ["cuda"])
        self.assertEqual(k.cuda_targets, ["sm_80", "sm_90"])
        self.assertEqual(k.cuda_head_dims(torch.bfloat16), [64])
        self.assertEqual(k.cuda_head_dims(torch.float16), [])
        self.assertEqual(k.cuda_head_dims(torch.float64), [])
        self.assertEqual(k.manifest["cuda"]["kernels"], [{"dtype": "bf16", "head_dim": 64}])
        self.assertIn("cuda_targets=['sm_80', 'sm_90']", repr(k))
        self.assertEqual(attn.load(fixture("probe")).cuda_targets, [])
        q = torch.randn(1, 1, 4, 64)
        with self.assertRaisesRegex(RuntimeError, r"q is a CPU tensor but artifact .*fx_triton_gpu.so "
                                                  r"has no CPU code \(devices: cuda\)"):
            k(q, q, q)

    def test_cuda_targets_option(self):
        from attn.compiler import cuda_targets_of
        self.assertEqual(cuda_targets_of(None), [])
        self.assertEqual(cuda_targets_of("sm_80, sm_90"), ["sm_80", "sm_90"])
        self.assertEqual(cuda_targets_of(["sm_86"]), ["sm_86"])
        auto = cuda_targets_of("auto")
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            self.assertIn(f"sm_{major}{minor}", auto)
        else:
            self.assertEqual(auto, [])

    def test_load_errors_are_runtime_errors(self):
        with self.assertRaisesRegex(RuntimeError, "ABI version mismatch: manifest field 'abi': expected .*found 1000"):
            attn.load(fixture("wrong_abi"))
        with self.assertRaisesRegex(RuntimeError, "not found"):
            attn.load("/nonexistent/softmax.so")
        with self.assertRaisesRegex(RuntimeError, "has no 'attn_manifest' symbol"):
            attn.load(fixture("no_manifest"))
        with self.assertRaisesRegex(RuntimeError, "manifest field 'params\\[0\\].init': expected a number"):
            attn.load(fixture("malformed"))
        with self.assertRaisesRegex(RuntimeError, "lists dtype f64.*missing"):
            attn.load(fixture("missing_f64"))

    def test_validation_errors(self):
        k = attn.load(fixture("abort"))  # kernels abort(): validation must reject first
        q = torch.randn(2, 3, 5, 4)
        kk = torch.randn(2, 3, 7, 4)
        v = torch.randn(2, 3, 7, 6)
        with self.assertRaisesRegex(RuntimeError, r"params has 3 elements, expected 2 .*alpha, beta"):
            k(q, kk, v, torch.zeros(3))
        with self.assertRaisesRegex(RuntimeError, "head dim d"):
            k(q, torch.randn(2, 3, 7, 5), v)
        with self.assertRaisesRegex(RuntimeError, "compiled for dtypes f32 only"):
            k(q.double(), kk.double(), v.double())
        with self.assertRaisesRegex(RuntimeError, r"key_lengths\[0\] = 9"):
            k(q, kk, v, key_lengths=torch.tensor([9, 1]))
        with self.assertRaisesRegex(RuntimeError, "q must be a 4-D tensor"):
            k(q[0], kk, v)

    def _check_autograd(self, dtype, causal):
        k = attn.load(fixture("probe"))
        B, H, Nq, Nk, d, dv = 2, 3, 70, 9, 4, 5
        q = torch.randn(B, H, d, Nq, dtype=dtype).transpose(2, 3).requires_grad_()
        kk = torch.randn(B, H, Nk, d, dtype=dtype, requires_grad=True)
        v = torch.randn(B, H, Nk, dv, dtype=dtype, requires_grad=True)
        params = k.initial_params(dtype).requires_grad_()
        kv = [9, 2]
        out = k(q, kk, v, params, is_causal=causal, key_lengths=torch.tensor(kv))
        self.assertTrue(out.requires_grad)
        self.assertIsNotNone(out.grad_fn)
        w = torch.randn_like(out)
        (out * w).sum().backward()
        with torch.no_grad():
            o, rm, rs = probe_forward_ref(q, v, params, kv, causal)
            torch.testing.assert_close(out, o)
            dq, dk, dvv, dp = probe_backward_ref(q, kk, v, params, o, rm, rs, w, kv, causal)
        torch.testing.assert_close(q.grad, dq)
        torch.testing.assert_close(kk.grad, dk)
        torch.testing.assert_close(v.grad, dvv)
        torch.testing.assert_close(params.grad, dp)

        # forward_with_stats: no autograd, the row statistics come back.
        o2, rm2, rs2 = k.forward_with_stats(q, kk, v, params, causal, torch.tensor(kv))
        self.assertFalse(o2.requires_grad)
        torch.testing.assert_close(o2, o)
        torch.testing.assert_close(rm2, rm)
        torch.testing.assert_close(rs2, rs)

    def test_autograd_flows_f32(self):
        self._check_autograd(torch.float32, False)

    def test_autograd_flows_f64_causal(self):
        self._check_autograd(torch.float64, True)

    def test_double_backward_refused(self):
        k = attn.load(fixture("probe"))
        q = torch.randn(1, 2, 3, 4, requires_grad=True)
        with self.assertRaisesRegex(RuntimeError, r"double backward \(create_graph=True\) is not supported"):
            torch.autograd.grad(k(q, q, q).sum(), q, create_graph=True)

    def test_default_params_no_grad(self):
        k = attn.load(fixture("probe"))
        q = torch.randn(1, 2, 3, 4, requires_grad=True)
        out = k(q, q, q)
        out.sum().backward()
        self.assertIsNotNone(q.grad)

    def test_module(self):
        m = attn.Attention(fixture("probe"), dtype=torch.float64)
        self.assertEqual([n for n, _ in m.named_parameters()], ["params"])
        q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
        m(q, q, q).sum().backward()
        self.assertEqual(m.params.grad.shape, (2,))
        self.assertIn("probe_attention", repr(m))


if __name__ == "__main__":
    torch.set_num_threads(2)
    unittest.main()
