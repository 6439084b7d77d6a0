"""Property test of attn-classify-normalizer (issue 33): random expression trees over the
region op set, each a normalizer's numerator with a random denominator (sum, ε + sum, an
independent random region, count, constant) and a kernel, all in one attn-opt input
run once with --split-input-file. Every chunk is classified online, plain or refused,
and:

- a refused chunk has an `error:` located in that chunk that names an op
  (`'dialect.op' op ...`);
- a plain chunk's regions, as the classifier printed them (after its stable-form
  rewrites), evaluated op by op in numpy float32 at scores on a grid over [-1e4, 1e4]
  (±1e4, 0, ±1, ±88.7, ±89, ±128, ... and random points), are finite wherever the
  exact value of the region as written is, unless float32 rounded an operand onto a
  pole or outside a domain. The exact value is mpmath's at 40 digits, taken at the
  float32 score itself; a point counts only where it is a real number within
  float32's range. Domain NaNs (log or sqrt of a negative, powf of a negative base to
  a fraction) and poles (1/0, log 0) are the user's, as in float64, and not counted;
  so are points where float32 reaches one by rounding (tanh(30) - 1 is 0 in float32,
  -1.7e-26 exactly: s / (tanh(s) - 1) is 1/0 there), as the classifier leaves a
  division by a value that can be 0 to the user (lib/Analysis/RangeAnalysis.h). A
  violation is a non-finite value that depends on one that outgrew float32 (a
  non-finite result of finite operands, not at a pole or outside the op's domain). mpmath gives up (NaN, point not counted) only on sin/cos of arguments past
  1e20 and on exponents past 1e9, where float32 has long overflowed;
- a fixed-seed sample of the online kernels compiles (f32) and its output O matches an
  mpmath reference at scores up to ±1e4 to 1e-3·max_i Σ_j |g_ij| |v_j| / |C_i| (the
  scores are exact in float32: one-hot q rows and integer k entries), and a sample of
  plain kernels compiles and is finite there. Sampled are kernels whose exact O is a
  real number within float32's range and whose C_i is well-conditioned at those
  inputs: (ε + Σ_j |h|) / |C_i| <= 10 (a summand of both signs is accepted with ε as the
  user's statement that the sum stays away from 0, docs/language.md "Denominators that can
  vanish").

The counts are printed (`pytest -s`) and the test fails listing every offending
expression. The plain check evaluates only where float32 is not finite, so mpmath
runs on few points.
"""
import math
import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import mpmath
import numpy as np
import torch

from conftest import ATTN_COMPILE, BUILD

SEED = 33
EXPRESSIONS = 3000
MAX_DEPTH = 4
ONLINE_SAMPLE, PLAIN_SAMPLE = 8, 3
# |O - O_ref| <= this · max_i Σ_j |g_ij| |v_j| / |C_i|: float32 rounds exponents of
# size 1e4 to ~1e-3, which scales e^(x - m) by as much.
ONLINE_TOLERANCE = 1e-3
F32_MAX = float(np.finfo(np.float32).max)
ARGS = "%s: f32, %b: index, %h: index, %i: index, %j: index"
SCORE_MAGNITUDE = 1e4

CONSTANTS = [0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 1e-3, 3.0, 30.0, -30.0]
BINARY = ["arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf",
          "arith.minimumf"]
UNARY = ["arith.negf", "math.absf", "math.exp", "math.exp2", "math.expm1", "math.sinh",
         "math.cosh", "math.tanh", "math.log", "math.log1p", "math.sqrt", "math.sin",
         "math.cos", "math.atan", "math.erf"]
PREDICATES = ["olt", "ogt", "ole", "oge"]
POW_BASES = [2.0, 0.5, 10.0, -2.0]       # powf(c, x); c <= 0 is refused
POW_EXPONENTS = [2.0, 3.0, 0.5, -1.0]    # powf(x, c)


# --- expressions: trees of tuples, ("s",) | ("const", c) | (op, child, ...) -------------

def random_tree(rng, depth=0):
    if depth >= MAX_DEPTH or rng.random() < 0.15 + 0.2 * depth:
        return ("s",) if rng.random() < 0.6 else ("const", rng.choice(CONSTANTS))
    kind = rng.random()
    sub = lambda: random_tree(rng, depth + 1)
    if kind < 0.4:
        return (rng.choice(BINARY), sub(), sub())
    if kind < 0.85:
        return (rng.choice(UNARY), sub())
    if kind < 0.93:
        if rng.random() < 0.5:
            return ("math.powf", ("const", rng.choice(POW_BASES)), sub())
        return ("math.powf", sub(), ("const", rng.choice(POW_EXPONENTS)))
    return ("arith.select", rng.choice(PREDICATES), sub(), sub(), sub(), sub())


def fold(tree, score, constant, select, op):
    """tree folded bottom-up, children left to right: score() at s, constant(c),
    select(predicate, a, b, x, y) and op(name, operands) of the children's results."""
    kind, fold_child = tree[0], lambda c: fold(c, score, constant, select, op)
    if kind == "s":
        return score()
    if kind == "const":
        return constant(tree[1])
    if kind == "arith.select":
        return select(tree[1], *map(fold_child, tree[2:]))
    return op(kind, [fold_child(c) for c in tree[1:]])


def reads_score(tree):
    return fold(tree, lambda: True, lambda c: False, lambda p, *args: any(args),
                lambda name, args: any(args))


def region_body(tree):
    """The ops of a region computing `tree` from %s, ending in attn.yield."""
    lines = []

    def assign(text):
        name = f"%v{len(lines) + 1}"
        lines.append(f"{name} = {text} : f32")
        return name

    def select(pred, a, b, x, y):
        return assign(f"arith.select {assign(f'arith.cmpf {pred}, {a}, {b}')}, {x}, {y}")

    result = fold(tree, lambda: "%s", lambda c: assign(f"arith.constant {c:.6e}"), select,
                  lambda name, args: assign(f"{name} {', '.join(args)}"))
    lines.append(f"attn.yield {result} : f32")
    return "\n".join("    " + line for line in lines)


def region(tree):
    return f"{{\n  ^bb0({ARGS}):\n{region_body(tree)}\n  }}"


def describe(tree):
    return fold(tree, lambda: "s", repr, lambda p, a, b, x, y: f"select({a} {p} {b}, {x}, {y})",
                lambda name, args: f"{name.split('.')[1]}({', '.join(args)})")


class Case:
    def __init__(self, rng):
        self.numerator = random_tree(rng)
        kind = rng.choice(["sum", "epsilon sum", "region", "epsilon region", "count",
                           "constant"])
        self.denominator_kind = kind
        self.denominator = random_tree(rng) if kind.endswith("region") else None

    def denominator_text(self):
        eps = "epsilon 1.0e-06 " if self.denominator_kind.startswith("epsilon") else ""
        if self.denominator_kind == "count":
            return "count"
        if self.denominator_kind == "constant":
            return "constant 1.0"
        if self.denominator_kind.endswith("sum"):
            return eps + "sum"
        return eps + region(self.denominator)

    def ir(self, name="n"):
        return (f"attn.normalizer @{name} {{\n  numerator {region(self.numerator)}\n"
                f"  denominator {self.denominator_text()}\n}}\n"
                f"attn.kernel @k normalizer(@{name})\n")

    def epsilon(self):
        return 1e-6 if self.denominator_kind.startswith("epsilon") else 0.0

    def summand(self):
        """The tree summed over j in C_i, or None (count, constant)."""
        if self.denominator_kind.endswith("sum"):
            return self.numerator
        return self.denominator

    def __str__(self):
        den = self.denominator_kind if self.denominator is None else \
            f"{self.denominator_kind} h = {describe(self.denominator)}"
        return f"g = {describe(self.numerator)}; denominator {den}"


# --- the classifier's printed regions -----------------------------------------------------

OP_LINE = re.compile(r"^\s*(%[\w]+) = ([a-z_]+\.[a-z_0-9]+) (.*?) : f32$")
YIELD_LINE = re.compile(r"^\s*attn\.yield (%[\w]+) : f32$")


def parse_regions(module_text):
    """{'numerator': ops, 'denominator': ops} of the normalizer as printed; ops are
    (result, op, operands, predicate or constant) and end in ('yield', value)."""
    regions, current = {}, None
    for line in module_text.splitlines():
        head = line.strip()
        for name in ("numerator", "denominator", "offset"):
            if head.startswith(name) and head.endswith("{"):
                current = regions.setdefault(name, [])
        if current is None:
            continue
        m = YIELD_LINE.match(line)
        if m:
            current.append(("yield", m.group(1)))
            current = None
            continue
        m = OP_LINE.match(line)
        if m:
            result, op, rest = m.groups()
            if op == "arith.constant":
                current.append((result, op, [], float(rest.split()[0])))
            elif op == "arith.cmpf":
                pred, *operands = [x.strip() for x in rest.split(",")]
                current.append((result, op, operands, pred))
            else:
                operands = [x.strip() for x in rest.split(" fastmath")[0].split(",")]
                current.append((result, op, operands, None))
        elif current is not None and "=" in head:
            raise AssertionError(f"unparsed region line: {line!r}")
    return regions


# --- evaluation: numpy float32 (vectorised over scores) and mpmath (one score) ------------

def _np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(np.float32)


NP_OPS = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.negf": np.negative, "math.absf": np.abs, "math.exp": np.exp, "math.exp2": np.exp2,
    "math.expm1": np.expm1, "math.sinh": np.sinh, "math.cosh": np.cosh, "math.tanh": np.tanh,
    "math.log": np.log, "math.log1p": np.log1p, "math.sqrt": np.sqrt, "math.sin": np.sin,
    "math.cos": np.cos, "math.atan": np.arctan, "math.erf": _np_erf, "math.powf": np.power,
}
NP_CMP = {"olt": np.less, "ogt": np.greater, "ole": np.less_equal, "oge": np.greater_equal}


def at_pole_or_outside_domain(op, args):
    """Where `op` of finite float32 operands is not finite because they lie at a pole or
    outside its domain (1/0, log 0, log(-1), sqrt(-1), 0^-1, (-2)^0.5) rather than
    because its value outgrew float32."""
    if op == "arith.divf":
        return np.asarray(args[1] == 0)
    if op in ("math.log", "math.sqrt"):
        return args[0] <= 0
    if op == "math.log1p":
        return args[0] <= -1
    if op == "math.powf":
        return (args[0] < 0) | ((args[0] == 0) & (args[1] < 0))
    return np.False_


def eval_f32(ops, s):
    """The region's value at the scores s in float32, and where that value depends on
    one that outgrew float32 (a non-finite result of finite operands, not at a pole or
    outside the op's domain)."""
    env = {"%s": s.astype(np.float32)}
    outgrew = {"%s": np.zeros(s.shape, dtype=bool)}
    with np.errstate(all="ignore"):
        for entry in ops:
            if entry[0] == "yield":
                return (np.broadcast_to(env[entry[1]], s.shape).astype(np.float32),
                        np.broadcast_to(outgrew[entry[1]], s.shape))
            result, op, operands, extra = entry
            args = [env[a] for a in operands]
            inherited, finite_operands = np.zeros(s.shape, dtype=bool), True
            for name, value in zip(operands, args):
                inherited, finite_operands = inherited | outgrew[name], \
                    finite_operands & np.isfinite(value)
            if op == "arith.constant":
                env[result] = np.float32(extra)
            elif op == "arith.cmpf":
                env[result] = NP_CMP[extra](*args)
            elif op == "arith.select":
                env[result] = np.where(*args).astype(np.float32)
                inherited = outgrew[operands[0]] | np.where(args[0], outgrew[operands[1]],
                                                            outgrew[operands[2]])
            else:
                env[result] = np.asarray(NP_OPS[op](*args), dtype=np.float32)
                inherited |= ~np.isfinite(env[result]) & finite_operands & \
                    ~at_pole_or_outside_domain(op, args)
            outgrew[result] = inherited
    raise AssertionError("region without attn.yield")


NAN, INF = mpmath.mpf("nan"), mpmath.mpf("inf")
HUGE_EXPONENT, HUGE_ANGLE = 1e9, 1e20


def _real(x):
    return x if isinstance(x, mpmath.mpf) else NAN


def _mp_exp(x):
    if mpmath.isnan(x):
        return NAN
    if abs(x) > HUGE_EXPONENT:
        return INF if x > 0 else mpmath.mpf(0)
    return mpmath.exp(x)


def _mp_div(a, b):
    if b == 0:
        return NAN   # a pole (or 0/0): the user's
    return a / b


def _mp_log(x, shift=0):
    if mpmath.isnan(x) or x + shift < 0:
        return NAN
    if x + shift == 0:
        return NAN   # a pole
    return mpmath.log1p(x) if shift else mpmath.log(x)


def _mp_trig(f):
    return lambda x: NAN if mpmath.isnan(x) or abs(x) > HUGE_ANGLE else f(x)


def _mp_pow(a, b):
    if mpmath.isnan(a) or mpmath.isnan(b):
        return NAN
    if a == 0:
        return NAN if b < 0 else (mpmath.mpf(1) if b == 0 else mpmath.mpf(0))
    if a > 0:
        return _mp_exp(b * mpmath.log(a))
    if b != mpmath.floor(b):
        return NAN   # a negative base to a fraction: complex
    magnitude = _mp_exp(b * mpmath.log(-a))
    return magnitude if int(b) % 2 == 0 else -magnitude


def _mp_extreme(pick):
    return lambda a, b: NAN if mpmath.isnan(a) or mpmath.isnan(b) else pick(a, b)


MP_OPS = {
    "arith.addf": lambda a, b: a + b, "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b, "arith.divf": _mp_div,
    "arith.maximumf": _mp_extreme(max), "arith.minimumf": _mp_extreme(min),
    "arith.negf": lambda x: -x, "math.absf": abs, "math.exp": _mp_exp,
    "math.exp2": lambda x: _mp_exp(x * mpmath.log(2)),
    "math.expm1": lambda x: mpmath.expm1(x) if abs(x) < 1 else _mp_exp(x) - 1,
    "math.sinh": lambda x: (_mp_exp(x) - _mp_exp(-x)) / 2 if abs(x) > 1 else mpmath.sinh(x),
    "math.cosh": lambda x: (_mp_exp(x) + _mp_exp(-x)) / 2,
    "math.tanh": lambda x: NAN if mpmath.isnan(x) else mpmath.tanh(x),
    "math.log": _mp_log, "math.log1p": lambda x: _mp_log(x, 1),
    "math.sqrt": lambda x: NAN if mpmath.isnan(x) or x < 0 else mpmath.sqrt(x),
    "math.sin": _mp_trig(mpmath.sin), "math.cos": _mp_trig(mpmath.cos),
    "math.atan": lambda x: NAN if mpmath.isnan(x) else mpmath.atan(x),
    "math.erf": lambda x: NAN if mpmath.isnan(x) else mpmath.erf(x),
    "math.powf": _mp_pow,
}
MP_CMP = {"olt": lambda a, b: a < b, "ogt": lambda a, b: a > b,
          "ole": lambda a, b: a <= b, "oge": lambda a, b: a >= b}


def eval_exact(ops, s):
    """The region's value at score s (an mpf) in mpmath; NaN where it is not a real
    number (domain, pole) or mpmath gives up."""
    env = {"%s": mpmath.mpf(float(s))}
    for entry in ops:
        if entry[0] == "yield":
            return _real(env[entry[1]])
        result, op, operands, extra = entry
        args = [env[a] for a in operands]
        if op == "arith.constant":
            env[result] = mpmath.mpf(float(np.float32(extra)))
        elif op == "arith.cmpf":
            # a comparison with a pole or a domain NaN leaves the choice undetermined
            env[result] = None if any(mpmath.isnan(a) for a in args) else MP_CMP[extra](*args)
        elif op == "arith.select":
            env[result] = NAN if args[0] is None else (args[1] if args[0] else args[2])
        else:
            env[result] = _real(MP_OPS[op](*args))
    raise AssertionError("region without attn.yield")


def score_grid(rng):
    fixed = [0.0, 1.0, 0.5, 1e-3, 30.0, 88.7, 89.0, 128.0, 710.0, 1e3, 1e4]
    points = fixed + [-x for x in fixed]
    points += [rng.uniform(-1e4, 1e4) for _ in range(24)]
    points += [rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 4) for _ in range(24)]
    return np.array(points, dtype=np.float32)


def plain_violations(input_ops, output_ops, grid):
    """Scores where the printed region outgrows float32 on the way to a value that is
    not finite while the region as written is exactly a real number within float32's
    range; the number of scores where it is not finite; and the number of those where
    the exact value is in range but float32 rounded an operand onto a pole or outside a
    domain (tanh(30) - 1 is 0 in float32), which the classifier leaves to the user as
    it does 1/s at s = 0."""
    got, overflowed = eval_f32(output_ops, grid)
    bad, nonfinite, rounded = [], ~np.isfinite(got), 0
    for s, outgrew in zip(grid[nonfinite], overflowed[nonfinite]):
        exact = eval_exact(input_ops, s)
        if not mpmath.isnan(exact) and abs(exact) <= F32_MAX:
            if outgrew:
                bad.append((float(s), float(exact)))
            else:
                rounded += 1
    return bad, int(nonfinite.sum()), rounded


# --- running the classifier ---------------------------------------------------------------

SEPARATOR = "// -----"
ERROR_LINE = re.compile(r"^[^:\n]*:(\d+):\d+: error: (.*)$", re.M)
NAMES_AN_OP = re.compile(r"^'[a-z_]+\.[a-z_0-9]+' op ")


def classify(cases, tmp_path):
    """Each case's class ('online', 'plain', 'refused'), its printed module and the errors
    located in its chunk."""
    chunks = [c.ir() for c in cases]
    source = tmp_path / "property.mlir"
    source.write_text(f"\n{SEPARATOR}\n".join(chunks))
    first_line, line = [], 1
    for chunk in chunks:
        first_line.append(line)
        line += chunk.count("\n") + 2   # the chunk, then "\n// -----\n"
    r = subprocess.run([str(BUILD / "bin" / "attn-opt"), str(source), "--split-input-file",
                        "--attn-expand-shared-regions", "--attn-classify-normalizer"],
                       capture_output=True, text=True, timeout=300)
    modules = re.split(rf"^{SEPARATOR}$", r.stdout, flags=re.M)
    assert len(modules) == len(cases), (len(modules), len(cases), r.stderr[-2000:])
    errors = [[] for _ in cases]
    for m in ERROR_LINE.finditer(r.stderr):
        index = max(i for i, first in enumerate(first_line) if first <= int(m.group(1)))
        errors[index].append(m.group(2))
    results = []
    for module, errs in zip(modules, errors):
        if "module" not in module:
            results.append(("refused", module, errs))
        elif "algorithm = #attn<algorithm online>" in module.split("numerator")[0]:
            results.append(("online", module, errs))
        else:
            assert "algorithm = #attn<algorithm plain>" in module, module
            results.append(("plain", module, errs))
    return results


# --- compiling a sample ---------------------------------------------------------------------

Q_ONEHOT_DIM = 4


def exact_score_inputs(rng, Nq=3, Nk=6):
    """q rows one-hot and k entries 2·integers (d = 4, s = q·k/2): every score exact in
    float32, reaching ±1e4 in every row, together with the scores."""
    d = Q_ONEHOT_DIM
    picks = [1e4, -1e4, 0.0, 1.0, -1.0, 89.0, -89.0, 128.0, 30.0, -700.0]
    k = np.zeros((Nk, d))
    for c in range(d):
        values = [1e4, -1e4] + [rng.choice(picks + [round(rng.uniform(-1e4, 1e4))])
                                for _ in range(Nk - 2)]
        rng.shuffle(values)
        k[:, c] = 2 * np.array(values)
    q = np.zeros((Nq, d))
    for i in range(Nq):
        q[i, i % d] = 1.0
    v = np.array([[rng.uniform(-1, 1) for _ in range(3)] for _ in range(Nk)])
    s = q @ k.T / math.sqrt(d)
    return q, k, v, s


def reference_output(case, s, v):
    """O_i = Σ_j g(s_ij) v_j / C_i in mpmath and the size of its terms,
    max_i Σ_j |g_ij| |v_j| / |C_i|; None where O is not a real number within float32's
    range or C_i is ill-conditioned, (ε + Σ_j |h_ij|) / |C_i| > 10 (a summand of both
    signs, accepted with ε as the user's statement that the sum stays positive)."""
    numerator_ops = parse_regions(case.ir())["numerator"]
    summand = case.summand()
    summand_ops = None if summand is None else \
        parse_regions(f"numerator {region(summand)}")["numerator"]
    out, terms = [], 0.0
    for row in s:
        g = [eval_exact(numerator_ops, x) for x in row]
        if case.denominator_kind == "count":
            C, magnitude = mpmath.mpf(len(row)), mpmath.mpf(len(row))
        elif case.denominator_kind == "constant":
            C, magnitude = mpmath.mpf(1), mpmath.mpf(1)
        else:
            h = [eval_exact(summand_ops, x) for x in row]
            if any(mpmath.isnan(x) or mpmath.isinf(x) for x in h):
                return None
            C = case.epsilon() + mpmath.fsum(h)
            magnitude = case.epsilon() + mpmath.fsum(abs(x) for x in h)
        if any(mpmath.isnan(x) or mpmath.isinf(x) for x in g) or C == 0 or \
                magnitude > 10 * abs(C):
            return None
        O = [mpmath.fsum(gj * mpmath.mpf(vj[c]) for gj, vj in zip(g, v)) / C
             for c in range(v.shape[1])]
        if any(abs(o) > F32_MAX for o in O):
            return None
        out.append([float(o) for o in O])
        terms = max(terms, float(mpmath.fsum(abs(gj) * abs(vj).sum() for gj, vj in zip(g, v))
                                 / abs(C)))
    return np.array(out), terms


def sample_with_references(cases, count, rng):
    """Up to `count` of `cases` (in a random order) whose numerator reads the score and
    whose output has a reference at scores up to ±1e4, each with its inputs and that
    reference."""
    chosen = []
    for case in rng.sample(cases, len(cases)):
        if len(chosen) == count:
            break
        if not reads_score(case.numerator):
            continue
        q, k, v, s = exact_score_inputs(rng)
        reference = reference_output(case, s, v)
        if reference is not None:
            chosen.append((case, (q, k, v), reference))
    return chosen


def compile_case(case, out_dir, name):
    source = out_dir / f"{name}.mlir"
    source.write_text(case.ir(name))
    artifact = out_dir / f"{name}.so"
    r = subprocess.run([str(ATTN_COMPILE), "--dtypes=f32", str(source), "-o", str(artifact)],
                       capture_output=True, text=True, timeout=300)
    return artifact if r.returncode == 0 else r.stderr[-2000:]


def run_kernel(attn_mod, artifact, q, k, v):
    as_t = lambda x: torch.tensor(x, dtype=torch.float32)[None, None]
    return attn_mod.load(artifact)(as_t(q), as_t(k), as_t(v), None)[0, 0].double().numpy()


# --- the test -------------------------------------------------------------------------------

def test_classifier_property(attn_mod, tmp_path):
    mpmath.mp.dps = 40
    rng = random.Random(SEED)
    cases = [Case(rng) for _ in range(EXPRESSIONS)]
    results = classify(cases, tmp_path)
    grid = score_grid(rng)
    violations, counts = [], {"online": 0, "plain": 0, "refused": 0}
    points = nonfinite_points = rounded_points = overflow_points = 0
    for case, (kind, module, errs) in zip(cases, results):
        counts[kind] += 1
        if kind == "refused":
            if not any(NAMES_AN_OP.match(e) for e in errs):
                violations.append(f"refused without an error naming an op ({errs}): {case}")
            continue
        if kind != "plain":
            continue
        written, printed = parse_regions(case.ir()), parse_regions(module)
        for name in ("numerator", "denominator"):
            if name not in written:
                continue   # sum, count, constant: nothing more than the numerator
            bad, nonfinite, rounded = plain_violations(written[name], printed[name], grid)
            points, nonfinite_points = points + len(grid), nonfinite_points + nonfinite
            rounded_points, overflow_points = rounded_points + rounded, overflow_points + len(bad)
            if bad:
                violations.append(f"plain but {name} not finite in f32 at (s, exact) "
                                  f"{bad[:3]}: {case}")

    sample = random.Random(SEED + 1)
    chosen = [("online", *c) for c in sample_with_references(
        [c for c, r in zip(cases, results) if r[0] == "online"], ONLINE_SAMPLE, sample)]
    chosen += [("plain", *c) for c in sample_with_references(
        [c for c, r in zip(cases, results) if r[0] == "plain"], PLAIN_SAMPLE, sample)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        artifacts = list(pool.map(lambda n: compile_case(chosen[n][1], tmp_path, f"case{n}"),
                                  range(len(chosen))))
    worst = 0.0
    for (kind, case, inputs, (want, terms)), artifact in zip(chosen, artifacts):
        if isinstance(artifact, str):
            violations.append(f"{kind} but attn-compile failed: {case}\n{artifact}")
            continue
        got = run_kernel(attn_mod, artifact, *inputs)
        if not np.isfinite(got).all():
            violations.append(f"{kind} but O not finite at |s| <= 1e4: {case}")
        elif kind == "online":
            err = np.abs(got - want).max()
            if terms > 0:
                worst = max(worst, err / (ONLINE_TOLERANCE * terms))
            if not err <= ONLINE_TOLERANCE * terms:
                violations.append(f"online O off by {err:.3e} (terms {terms:.3e}): {case}")

    print(f"\nclassifier property: {EXPRESSIONS} expressions, {counts['online']} online, "
          f"{counts['plain']} plain ({points} region-scores in f32, {nonfinite_points} "
          f"not finite: {rounded_points} by float32 rounding onto a pole, {overflow_points} "
          f"by an overflow where the exact value is in range), "
          f"{counts['refused']} refused; compiled "
          f"{len(chosen)} ({sum(c[0] == 'online' for c in chosen)} online, worst error "
          f"{worst:.1e} of the tolerance); "
          f"{len(violations)} violations")
    assert not violations, "\n".join(violations)


def test_plain_check_sees_an_overflow():
    """The plain check itself: e^s·0 is 0 exactly but NaN in float32 from s = 89 on,
    and e^s - e^s likewise; log of 0 or of a negative is the user's, and so is
    s / (tanh(s) - 1) at s = 30, finite exactly (-1.5e30) but 1/0 in float32."""
    grid = np.array([0.0, 88.0, 89.0, 1e4, -5.0, 30.0], dtype=np.float32)
    mpmath.mp.dps = 40
    ops = lambda tree: parse_regions(f"numerator {region(tree)}")["numerator"]
    exp = ("math.exp", ("s",))
    times_zero = ops(("arith.mulf", exp, ("const", 0.0)))
    bad, nonfinite, rounded = plain_violations(times_zero, times_zero, grid)
    assert [s for s, _ in bad] == [89.0, 1e4] and (nonfinite, rounded) == (2, 0)
    difference = ops(("arith.subf", exp, exp))
    assert [s for s, _ in plain_violations(difference, difference, grid)[0]] == [89.0, 1e4]
    log = ops(("math.log", ("s",)))
    assert plain_violations(log, log, grid) == ([], 2, 0)   # log 0 = -inf: a pole
    pole = ops(("arith.divf", ("s",), ("arith.subf", ("math.tanh", ("s",)), ("const", 1.0))))
    # 88, 89, 1e4: beyond float32 exactly too; 30: tanh(30) - 1 rounded to 0
    assert plain_violations(pole, pole, grid) == ([], 4, 1)
