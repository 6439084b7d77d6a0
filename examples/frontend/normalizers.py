"""Seven normalizers of examples/normalizers/*.mlir written with the Python front-end.
Each gives the same IR as its .mlir file once attn-expand-shared-regions has written both
out (tanhmax.mlir shares e^±s in a shared region; the front-end writes each region whole),
the same manifest and bit-identical outputs and gradients
(test/python/test_frontend_examples.py; stick-breaking: test_stick_breaking.py).

    python examples/frontend/normalizers.py tanhmax > tanhmax.mlir   # for attn-opt, attn-compile
"""
import sys

import attn
from attn import exp, relu, sigmoid, softplus

# TanhMax (Huang et al.): weights in (-1, 1), g = e^s - e^-s, C = Σ_j (e^s + e^-s).
tanhmax = attn.kernel(attn.normalizer(numerator=lambda s: exp(s) - exp(-s),
                                      denominator=lambda s: exp(s) + exp(-s), name="tanhmax"))

# Sigsoftmax (Kanai et al.): g = e^s·sigmoid(s), C = Σ_j g.
sigsoftmax = attn.kernel(attn.normalizer(numerator=lambda s: exp(s) * sigmoid(s),
                                         denominator="sum", name="sigsoftmax"))

# Expressive attention (Gros): s = (q·k)², w = s / (ε + Σ_j s).
expressive = attn.kernel(
    attn.normalizer(numerator=lambda s: s, denominator="sum", epsilon=1e-6, name="expressive"),
    score=attn.score("dot", mod=lambda s: s * s, name="squared_dot"))

# Sigmoid attention: w = sigmoid(s + bias), C = 1, learnable bias.
sigmoid_attention = attn.kernel(attn.normalizer(numerator=lambda s, bias: sigmoid(s + bias),
                                                denominator=1.0, params={"bias": -4.0},
                                                name="sigmoid"))

# Stick-breaking (Tan et al.), a scan normalizer: w_ij = σ(s_ij)·exp(Σ_{k kept, k > j}
# -softplus(s_ik)) over the keys j < i, and the left-over weight to the query's own value.
stick_breaking = attn.kernel(
    attn.normalizer(numerator=lambda s: sigmoid(s), log_survival=lambda s: -softplus(s),
                    left_over="current", name="stick_breaking_left_over"),
    mask=attn.mask(lambda i, j: j < i, name="before"), name="stick_breaking_left_over_attention")

# Sparsemax: w = max(s - τ_i, 0), τ_i such that the row sums to 1 (an implicit normalizer,
# docs/normalizer-classes.md); the numerator takes s - τ_i as its s.
sparsemax = attn.kernel(attn.normalizer(numerator=lambda s: relu(s),
                                        denominator=attn.threshold(1.0), name="sparsemax"))


def entmax15_g(s):
    half = relu(s) * 0.5
    return half * half


# 1.5-entmax: w = (max(s - τ_i, 0)/2)², τ_i such that the row sums to 1.
entmax15 = attn.kernel(attn.normalizer(numerator=entmax15_g, denominator=attn.threshold(1.0),
                                       name="entmax15"))

KERNELS = {"tanhmax": tanhmax, "sigsoftmax": sigsoftmax, "expressive": expressive,
           "sigmoid": sigmoid_attention, "stick_breaking_left_over": stick_breaking,
           "sparsemax": sparsemax, "entmax15": entmax15}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in KERNELS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(KERNELS)}}}")
    print(KERNELS[sys.argv[1]])
